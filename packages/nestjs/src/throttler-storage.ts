// SentinelThrottlerStorage: @nestjs/throttler's ThrottlerStorage counted by one atomic Redis script per hit.
import type { OnApplicationShutdown } from '@nestjs/common';
import {
  ThrottlerCounter,
  type ThrottlerCounterOptions,
  type ThrottlerRecord,
} from '@sentinel/core/internal';

/**
 * Where the hits are counted (`redis`, `redisUrl`, or nothing for this process's memory), with
 * `prefix`, `timeout`, `connectTimeout`, `onStoreError`, `onError` and `breaker` as every
 * Sentinel limiter names them.
 * @example { redis: new Redis('redis://10.0.0.5:6379') }
 */
export type SentinelThrottlerStorageOptions = ThrottlerCounterOptions;

/**
 * A storage for @nestjs/throttler: keep `ThrottlerModule`, `@Throttle()` and `@SkipThrottle()`,
 * and count with Sentinel. Each `increment` is one Lua script on Redis, run on Redis's clock,
 * which reads, counts, blocks and sets expiries at once: processes sharing a Redis admit exactly
 * `limit` between them, however many requests race. It answers as @nestjs/throttler's own
 * ThrottlerStorageService does, per throttler name: the hits of the last `ttl` ms count, and
 * with a `blockDuration` the hit past the limit blocks the key for that long. Unlike it,
 * `timeToBlockExpire` is 0 whenever `isBlocked` is false (the guard reads it only when blocked).
 *
 * Without `redis` or `redisUrl` the hits are counted in this process's memory, in a table
 * bounded at 100,000 keys. It never hangs a request: a Redis call gives up after `timeout`
 * (50 ms by default) of silence, and then, as whenever Redis fails, `onStoreError` answers:
 * `'allow'` (the default: fail open, as every Sentinel limiter does) admits the request,
 * `'deny'` refuses it as blocked for a second, `'local'` counts it in memory meanwhile. Every
 * failure is reported to `onError`. The guard still writes its own headers and its own 429.
 *
 * Registered through `ThrottlerModule.forRoot({ storage })`, it is closed with the app: a
 * client it built from `redisUrl` is closed then; one given as `redis` stays yours. It has
 * @nestjs/throttler's `ThrottlerStorage` shape without importing it, not even its types, so that
 * this package's types need @nestjs/throttler only where it is used (it is an optional peer).
 * @example
 * ThrottlerModule.forRoot({
 *   throttlers: [{ ttl: 60_000, limit: 100 }],
 *   storage: new SentinelThrottlerStorage({ redis: new Redis(process.env.REDIS_URL) }),
 * })
 */
export class SentinelThrottlerStorage implements OnApplicationShutdown {
  readonly #counter: ThrottlerCounter;

  constructor(options: SentinelThrottlerStorageOptions = {}) {
    this.#counter = new ThrottlerCounter(options, '@sentinel/nestjs');
  }

  /**
   * Counts a hit of throttler `throttlerName` on `key` (the guard's SHA-256 of its tracker, used
   * as it is; any other key is hashed first, so no raw identifier reaches Redis). `ttl` and
   * `blockDuration` are in ms; the record's times are in seconds, as the guard sends them.
   */
  increment(
    key: string,
    ttl: number,
    limit: number,
    blockDuration: number,
    throttlerName: string,
  ): Promise<ThrottlerRecord> {
    return this.#counter.increment(key, ttl, limit, blockDuration, throttlerName);
  }

  /** Stops counting on Redis and closes a client built from `redisUrl`; later increments answer by `onStoreError`. */
  close(): Promise<void> {
    return this.#counter.close();
  }

  /** Nest calls it on `app.close()`. */
  onApplicationShutdown(): Promise<void> {
    return this.close();
  }
}
