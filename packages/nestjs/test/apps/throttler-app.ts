// A Nest app on Express or Fastify that keeps @nestjs/throttler (ThrottlerModule, ThrottlerGuard, @Throttle, @SkipThrottle) and counts in SentinelThrottlerStorage.
import 'reflect-metadata';
import { Controller, Get, type INestApplication, Module } from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { ExpressAdapter, type NestExpressApplication } from '@nestjs/platform-express';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { SkipThrottle, Throttle, ThrottlerGuard, ThrottlerModule } from '@nestjs/throttler';
import { SentinelThrottlerStorage, type SentinelThrottlerStorageOptions } from '@sentinel/nestjs';

export type Platform = 'express' | 'fastify';

@Controller()
export class ThrottledController {
  /** The module's throttlers: 5 a minute, and 1000 an hour as `long`. */
  @Get()
  root() {
    return { ok: true };
  }

  @Get('strict')
  @Throttle({ default: { limit: 2, ttl: 60_000 } })
  strict() {
    return { ok: true };
  }

  /** One a half second, then blocked for two seconds. */
  @Get('blocking')
  @Throttle({ default: { limit: 1, ttl: 500, blockDuration: 2_000 } })
  blocking() {
    return { ok: true };
  }

  @Get('health')
  @SkipThrottle()
  health() {
    return { ok: true };
  }
}

@Controller('internal')
@SkipThrottle()
export class InternalController {
  @Get()
  internal() {
    return { ok: true };
  }
}

export interface ThrottlerAppOptions {
  platform: Platform;
  /** Where the storage counts: `{ redis }`, `{ redisUrl }`, with a prefix each test gives. */
  storage: SentinelThrottlerStorageOptions;
}

export function throttlerModule(storage: SentinelThrottlerStorageOptions) {
  @Module({
    imports: [
      ThrottlerModule.forRoot({
        throttlers: [
          { ttl: 60_000, limit: 5 },
          { name: 'long', ttl: 3_600_000, limit: 1000 },
        ],
        storage: new SentinelThrottlerStorage(storage),
      }),
    ],
    controllers: [ThrottledController, InternalController],
    providers: [{ provide: APP_GUARD, useClass: ThrottlerGuard }],
  })
  class ThrottlerAppModule {}
  return ThrottlerAppModule;
}

/** The app, initialised and not yet listening. */
export async function createThrottlerApp({
  platform,
  storage,
}: ThrottlerAppOptions): Promise<INestApplication> {
  const module = throttlerModule(storage);
  if (platform === 'express') {
    const app = await NestFactory.create<NestExpressApplication>(module, new ExpressAdapter(), {
      logger: false,
    });
    return app.init();
  }
  const app = await NestFactory.create<NestFastifyApplication>(module, new FastifyAdapter(), {
    logger: false,
  });
  await app.init();
  await app.getHttpAdapter().getInstance().ready();
  return app;
}
