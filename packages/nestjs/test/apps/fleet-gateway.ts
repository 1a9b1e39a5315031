// A Nest gateway process for the multi-process races: Sentinel's guard, or @nestjs/throttler on a Redis storage, on a shared Redis.
//
// Configured by the environment (test/harness/nest-fleet.ts sets it): FLEET_PLATFORM (express or
// fastify), REDIS_URL, FLEET_PREFIX, FLEET_LIMIT and FLEET_MODE:
// - `sentinel`: SentinelModule and the global SentinelGuard, with `GET /<algorithm>` for each of
//   Sentinel's algorithms, each in a group of its own.
// - `throttler-sentinel`: ThrottlerModule and the global ThrottlerGuard, on
//   SentinelThrottlerStorage.
// - `throttler-nestlab`: the same on @nest-lab/throttler-storage-redis.
// The throttler modes serve `GET /throttled`, and `GET /store-errors`, unthrottled: how many Redis
// failures SentinelThrottlerStorage has answered by its failure mode (0 on @nest-lab's). Every
// mode counts a tenant by its `x-tenant-id` header, for an hour. An admitted request gets
// `{ ok: true, degraded }`, where `degraded` names the store-error mode that admitted it in place
// of Redis (Sentinel's guard only), or null. The process writes `{ port }` on stdout once it
// listens on 127.0.0.1, and shuts down when its stdin closes, which it does when the parent dies
// too.
import 'reflect-metadata';
import { ThrottlerStorageRedisService } from '@nest-lab/throttler-storage-redis';
import {
  Controller,
  Get,
  type INestApplication,
  type LoggerService,
  Module,
  Req,
} from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import {
  SkipThrottle,
  ThrottlerGuard,
  ThrottlerModule,
  type ThrottlerStorage,
} from '@nestjs/throttler';
import {
  ALGORITHMS,
  type Algorithm,
  byHeader,
  RateLimit,
  SentinelGuard,
  SentinelModule,
  type SentinelRequest,
  SentinelThrottlerStorage,
} from '@sentinel/nestjs';
import { Redis } from 'ioredis';

const MODES = ['sentinel', 'throttler-sentinel', 'throttler-nestlab'] as const;
type Mode = (typeof MODES)[number];

const platform = process.env.FLEET_PLATFORM ?? 'express';
const mode = (process.env.FLEET_MODE ?? 'sentinel') as Mode;
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const prefix = process.env.FLEET_PREFIX ?? 'sentinel';
const limit = Number(process.env.FLEET_LIMIT ?? 100);
const HOUR_MS = 3_600_000;
if (platform !== 'express' && platform !== 'fastify') {
  throw new Error(`unknown FLEET_PLATFORM: ${platform}`);
}
if (!MODES.includes(mode)) throw new Error(`unknown FLEET_MODE: ${mode}`);

/** What an admitted request gets: whether Redis decided it, or a store-error mode in its place. */
function admitted(req: SentinelRequest) {
  return { ok: true, degraded: req.rateLimit?.degraded ?? null };
}

/** `GET /<algorithm>`: the algorithm's own group, so each race starts from a full budget. */
function algorithmController(algorithm: Algorithm) {
  @Controller(algorithm)
  @RateLimit({ group: algorithm, algorithm, limit, window: '1h' })
  class AlgorithmController {
    @Get()
    admit(@Req() req: SentinelRequest) {
      return admitted(req);
    }
  }
  return AlgorithmController;
}

@Controller('throttled')
class ThrottledController {
  @Get()
  admit(@Req() req: SentinelRequest) {
    return admitted(req);
  }
}

/** Redis failures SentinelThrottlerStorage answered by `onStoreError` in place of Redis. */
let storeErrors = 0;

/** `GET /store-errors`: what a storage cannot say per request, as the guard's `degraded` does. */
@Controller('store-errors')
@SkipThrottle()
class StoreErrorsController {
  @Get()
  count() {
    return { storeErrors };
  }
}

const tenant = byHeader('x-tenant-id', { trusted: true });

function sentinelModule() {
  @Module({
    imports: [SentinelModule.forRoot({ redisUrl, prefix, identify: tenant, limit, window: '1h' })],
    controllers: ALGORITHMS.map(algorithmController),
    providers: [{ provide: APP_GUARD, useClass: SentinelGuard }],
  })
  class SentinelFleetModule {}
  return SentinelFleetModule;
}

/** @nestjs/throttler as its users set it up, with only the storage changed between modes. */
function throttlerModule(storage: ThrottlerStorage) {
  @Module({
    imports: [
      ThrottlerModule.forRoot({
        throttlers: [{ ttl: HOUR_MS, limit }],
        storage,
        getTracker: (req) => String(req.headers['x-tenant-id']),
      }),
    ],
    controllers: [ThrottledController, StoreErrorsController],
    providers: [{ provide: APP_GUARD, useClass: ThrottlerGuard }],
  })
  class ThrottlerFleetModule {}
  return ThrottlerFleetModule;
}

/** The throttler modes' own client; Sentinel's module opens and closes its own from `redisUrl`. */
const redis = mode === 'sentinel' ? undefined : new Redis(redisUrl);
redis?.on('error', () => {});

function appModule() {
  if (redis === undefined) return sentinelModule();
  if (mode === 'throttler-sentinel') {
    const onError = () => {
      storeErrors++;
    };
    return throttlerModule(new SentinelThrottlerStorage({ redis, prefix, onError }));
  }
  return throttlerModule(new ThrottlerStorageRedisService(redis));
}

// Errors reach stderr, which the parent shows when a gateway fails; nothing else is logged.
const logger: LoggerService = {
  log() {},
  warn() {},
  error: (...args: unknown[]) => console.error(...args),
};
const app: INestApplication = await NestFactory.create(
  appModule(),
  platform === 'express' ? new ExpressAdapter() : new FastifyAdapter(),
  { logger },
);
await app.listen(0, '127.0.0.1');
const { port } = app.getHttpServer().address() as { port: number };

let closing = false;
async function shutdown(): Promise<void> {
  if (closing) return;
  closing = true;
  // Whatever hangs, the process is gone within 2 s.
  setTimeout(() => process.exit(0), 2_000).unref();
  await app.close().catch(() => {});
  redis?.disconnect();
  process.exit(0);
}
process.on('SIGTERM', shutdown);
process.stdin.on('end', shutdown).on('close', shutdown).resume();
process.stdout.write(`${JSON.stringify({ port })}\n`);
