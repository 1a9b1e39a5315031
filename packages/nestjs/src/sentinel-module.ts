// SentinelModule: forRoot and forRootAsync provide the options, the service holding the limiters, the guard and the slot interceptor.

import {
  type DynamicModule,
  Global,
  Inject,
  Injectable,
  type InjectionToken,
  Module,
  type ModuleMetadata,
  type OptionalFactoryDependency,
  type Provider,
} from '@nestjs/common';
import {
  APP_GUARD,
  DiscoveryModule,
  DiscoveryService,
  MetadataScanner,
  Reflector,
} from '@nestjs/core';

import { checkedOptions, SENTINEL_OPTIONS, type SentinelModuleOptions } from './options.ts';
import { SentinelGuard } from './sentinel-guard.ts';
import { SentinelService } from './sentinel-service.ts';
import { bindToMessageHandlers, SlotInterceptor } from './slots.ts';

// Decorators applied as functions: this package is built without decorator syntax, so that any
// TypeScript loader runs it, and injects by explicit tokens, so that it needs no emitted metadata.
Injectable()(SentinelGuard);
Inject(SentinelService)(SentinelGuard, undefined, 0);
Inject(Reflector)(SentinelGuard, undefined, 1);
Injectable()(SlotInterceptor);

/** `forRootAsync()`'s options: the options from a factory, with what it injects. */
export interface SentinelModuleAsyncOptions extends Pick<ModuleMetadata, 'imports'> {
  /** Builds the module's options; may be async. */
  useFactory: (
    // biome-ignore lint/suspicious/noExplicitAny: Nest injects whatever `inject` names.
    ...args: any[]
  ) => SentinelModuleOptions | Promise<SentinelModuleOptions>;
  /** The providers passed to `useFactory`, such as `ConfigService`. */
  inject?: Array<InjectionToken | OptionalFactoryDependency>;
}

const service: Provider = {
  provide: SentinelService,
  useFactory: (options: SentinelModuleOptions) => new SentinelService(options),
  inject: [SENTINEL_OPTIONS],
};

/** Builds every `@RateLimit()`'s limiter once the app's modules exist: bad options fail start-up. */
class DecoratedLimiters {
  constructor(
    private readonly sentinel: SentinelService,
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
  ) {
    // Before Nest builds the handlers of gateways and resolvers (app.init()), after its scan.
    bindToMessageHandlers(discovery.getProviders().map(({ metatype }) => metatype));
  }

  onModuleInit(): void {
    this.sentinel.buildDecorated(this.discovery, this.scanner, this.reflector);
    // Nest names each APP_GUARD provider 'APP_GUARD (UUID: ...)'.
    this.sentinel.boundGlobally = this.discovery
      .getProviders()
      .some(
        ({ token, metatype, instance }) =>
          String(token).startsWith(APP_GUARD) &&
          (metatype === SentinelGuard ||
            (typeof metatype === 'function' && metatype.prototype instanceof SentinelGuard) ||
            instance instanceof SentinelGuard),
      );
  }
}
Injectable()(DecoratedLimiters);
Inject(SentinelService)(DecoratedLimiters, undefined, 0);
Inject(DiscoveryService)(DecoratedLimiters, undefined, 1);
Inject(MetadataScanner)(DecoratedLimiters, undefined, 2);
Inject(Reflector)(DecoratedLimiters, undefined, 3);

const shared: Provider[] = [service, DecoratedLimiters, SentinelGuard];

/**
 * Sentinel for a Nest app, on `@nestjs/platform-express` or `@nestjs/platform-fastify`. Global:
 * `SentinelGuard` and `SentinelService` can be injected in any module.
 * @example imports: [SentinelModule.forRoot({ redisUrl, limit: 100, window: '1m' })]
 */
// biome-ignore lint/complexity/noStaticOnlyClass: a Nest dynamic module is a class with static factories.
export class SentinelModule {
  /** The options, checked now: a misspelt or misused option throws a TypeError naming it. */
  static forRoot(options: SentinelModuleOptions): DynamicModule {
    checkedOptions(options, 'options');
    return {
      module: SentinelModule,
      global: true,
      imports: [DiscoveryModule],
      providers: [{ provide: SENTINEL_OPTIONS, useValue: options }, ...shared],
      exports: [SENTINEL_OPTIONS, SentinelService, SentinelGuard],
    };
  }

  /** The options from a factory, checked when the app creates the module. */
  static forRootAsync({
    imports = [],
    useFactory,
    inject = [],
  }: SentinelModuleAsyncOptions): DynamicModule {
    return {
      module: SentinelModule,
      global: true,
      imports: [DiscoveryModule, ...imports],
      providers: [{ provide: SENTINEL_OPTIONS, useFactory, inject }, ...shared],
      exports: [SENTINEL_OPTIONS, SentinelService, SentinelGuard],
    };
  }
}
Global()(SentinelModule);
Module({})(SentinelModule);
