// The module's limiters: one for its options, one per distinct @RateLimit() layering, all closed with the app.

import type { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import { createHttpLimiter, type Limiter } from '@sentinel/core';
import { connectOnce, type HttpLimiter, mergeHttpLimiterOptions } from '@sentinel/core/internal';
import {
  checkedOptions,
  RATE_LIMIT_METADATA,
  type RouteRateLimitOptions,
  type SentinelModuleOptions,
  type SentinelRequest,
} from './options.ts';

export type RouteLimiter = HttpLimiter<SentinelRequest, unknown>;

/**
 * Holds the limiters the guard uses. Inject it for `limiter` (to `peek` or `reset` a key) or for
 * a group's limiter.
 */
export class SentinelService {
  readonly #connection;
  readonly #base: SentinelModuleOptions;
  readonly #baseLimiter: RouteLimiter;
  /** By class options, then handler options: one limiter per layering, however many routes share it. */
  readonly #layered = new WeakMap<object, WeakMap<object, RouteLimiter>>();
  readonly #built: RouteLimiter[] = [];
  readonly #groups = new Map<string, Limiter>();

  constructor(options: SentinelModuleOptions) {
    // From `redisUrl`, one client for every route's limiter, closed after all of them.
    this.#connection = connectOnce(checkedOptions(options, 'options'));
    this.#base = this.#connection.options;
    try {
      this.#baseLimiter = this.#build(this.#base);
    } catch (error) {
      void this.#connection.close();
      throw error;
    }
  }

  /**
   * Whether an APP_GUARD provider binds SentinelGuard for the whole app: found as the app starts.
   * The global guard then leaves a handler that binds the guard itself to that binding.
   */
  boundGlobally = false;

  /** The limiter of the module's own options, for `peek` and `reset`. */
  get limiter(): Limiter {
    return this.#baseLimiter.limiter;
  }

  /** The limiter of each `group` named in the module's options or a `@RateLimit()`, by name. */
  get groups(): ReadonlyMap<string, Limiter> {
    return this.#groups;
  }

  /** The HTTP limiter for a handler: the module's options, its class's over them, its own over both. */
  limiterFor(
    classOptions: RouteRateLimitOptions | undefined,
    handlerOptions: RouteRateLimitOptions | undefined,
  ): RouteLimiter {
    if (classOptions === undefined && handlerOptions === undefined) return this.#baseLimiter;
    const first = classOptions ?? NONE;
    const second = handlerOptions ?? NONE;
    let byHandler = this.#layered.get(first);
    if (byHandler === undefined) {
      byHandler = new WeakMap();
      this.#layered.set(first, byHandler);
    }
    let limiter = byHandler.get(second);
    if (limiter === undefined) {
      let merged = this.#base;
      if (classOptions !== undefined) merged = mergeHttpLimiterOptions(merged, classOptions);
      if (handlerOptions !== undefined) merged = mergeHttpLimiterOptions(merged, handlerOptions);
      limiter = this.#build(merged);
      byHandler.set(second, limiter);
    }
    return limiter;
  }

  #build(options: SentinelModuleOptions): RouteLimiter {
    const limiter = createHttpLimiter<SentinelRequest, unknown>(options);
    this.#built.push(limiter);
    if (options.group !== undefined && !this.#groups.has(options.group)) {
      this.#groups.set(options.group, limiter.limiter);
    }
    return limiter;
  }

  /**
   * Builds the limiter of every `@RateLimit()` in the app as it starts, so that a bad option
   * fails `app.init()` (or `app.listen()`) with its TypeError instead of a request with a 500.
   */
  buildDecorated(
    discovery: DiscoveryService,
    scanner: MetadataScanner,
    reflector: Reflector,
  ): void {
    const options = (target: object) =>
      reflector.get<RouteRateLimitOptions | undefined>(RATE_LIMIT_METADATA, target as never);
    for (const { metatype } of [...discovery.getControllers(), ...discovery.getProviders()]) {
      if (typeof metatype !== 'function' || metatype.prototype === undefined) continue;
      const classOptions = options(metatype);
      for (const name of scanner.getAllMethodNames(metatype.prototype)) {
        const handlerOptions = options(metatype.prototype[name]);
        if (classOptions !== undefined || handlerOptions !== undefined) {
          this.limiterFor(classOptions, handlerOptions);
        }
      }
    }
  }

  /** Closes every limiter, then the client built from `redisUrl`; a client you passed stays open. */
  async close(): Promise<void> {
    await Promise.all(this.#built.map((limiter) => limiter.close()));
    await this.#connection.close();
  }

  /** Nest calls it on `app.close()`, and on a signal once `enableShutdownHooks()` is on. */
  onApplicationShutdown(): Promise<void> {
    return this.close();
  }
}

const NONE = Object.freeze({}) as RouteRateLimitOptions;
