// The Nest app under load, written as Nest users write it: a tiny JSON answer behind the variant's global guard.
import 'reflect-metadata';
import { ThrottlerStorageRedisService } from '@nest-lab/throttler-storage-redis';
import {
  type CanActivate,
  Controller,
  type ExecutionContext,
  Get,
  type INestApplication,
  Inject,
  Injectable,
  Module,
  type ModuleMetadata,
  type Provider,
} from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { ThrottlerGuard, ThrottlerModule } from '@nestjs/throttler';
import { SentinelGuard, SentinelModule } from '@sentinel/nestjs';
import { Redis } from 'ioredis';
import type {
  NestAppModule,
  NestAppSettings,
  NestPlatform,
  NestRequestLike,
  NestVariant,
} from './contract.js';

@Controller()
export class BenchController {
  @Get()
  root() {
    return { ok: true };
  }
}

const FLOOR = Symbol('floor');

/** The one-call floor as a Nest guard: one EVALSHA per request, and nothing else. */
@Injectable()
export class FloorGuard implements CanActivate {
  constructor(@Inject(FLOOR) private readonly floor: NonNullable<NestAppSettings['floor']>) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    await this.floor.call(context.switchToHttp().getRequest<NestRequestLike>());
    return true;
  }
}

/** The app's own client, as users create one: ioredis's defaults, the same for both limiters. */
function redisClient(redisUrl: string): Redis {
  const { hostname, port } = new URL(redisUrl);
  return new Redis({ host: hostname, port: Number(port) });
}

interface Limiting {
  readonly imports: NonNullable<ModuleMetadata['imports']>;
  readonly providers: Provider[];
  /** The client the app made for its limiter, which the app closes. */
  readonly redis?: Redis;
}

/** The variant's module imports and providers, and the client the app made, if any. */
function limiterOf(variant: NestVariant, settings: NestAppSettings): Limiting {
  const { limit, windowMs, apiKeyHeader } = settings;
  switch (variant) {
    case 'bare':
      return { imports: [], providers: [] };
    case 'floor':
      return {
        imports: [],
        providers: [
          { provide: FLOOR, useValue: settings.floor },
          { provide: APP_GUARD, useClass: FloorGuard },
        ],
      };
    case 'sentinel-own-client': {
      const redis = redisClient(settings.redisUrl);
      return {
        redis,
        imports: [
          SentinelModule.forRoot({
            redis,
            limit,
            window: windowMs,
            identify: (req) => ({ key: req.headers[apiKeyHeader] as string }),
            onError: settings.onError,
          }),
        ],
        providers: [{ provide: APP_GUARD, useClass: SentinelGuard }],
      };
    }
    case '@nestjs/throttler': {
      const redis = redisClient(settings.redisUrl);
      return {
        redis,
        imports: [
          ThrottlerModule.forRoot({
            throttlers: [{ name: 'default', ttl: windowMs, limit }],
            storage: new ThrottlerStorageRedisService(redis),
            getTracker: (req) => req.headers[apiKeyHeader],
          }),
        ],
        providers: [{ provide: APP_GUARD, useClass: ThrottlerGuard }],
      };
    }
  }
}

function benchModule({ imports, providers }: Limiting) {
  @Module({ imports, controllers: [BenchController], providers })
  class BenchModule {}
  return BenchModule;
}

function createApp(platform: NestPlatform, limiting: Limiting): Promise<INestApplication> {
  const adapter = platform === 'express' ? new ExpressAdapter() : new FastifyAdapter();
  // Without `abortOnError: false`, a failed start exits the process without a word (logger off).
  return NestFactory.create(benchModule(limiting), adapter, { logger: false, abortOnError: false });
}

export const serveNest: NestAppModule['serveNest'] = async (platform, variant, settings) => {
  const limiting = limiterOf(variant, settings);
  const app = await createApp(platform, limiting);
  await app.listen(0, '127.0.0.1');
  const address = app.getHttpServer().address();
  if (typeof address !== 'object' || !address) throw new Error('Nest is not listening');
  return {
    port: address.port,
    async close() {
      await app.close();
      // A client passed in is the app's to close: neither limiter closes it.
      await limiting.redis?.quit();
    },
  };
};
