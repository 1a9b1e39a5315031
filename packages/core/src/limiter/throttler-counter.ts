// @nestjs/throttler's hits counted by Sentinel: one atomic script call per increment on Redis, or
// its twin in memory, under the limiter's deadline, breaker and failure mode.
import { createHash } from 'node:crypto';
import type { ThrottlerRecord } from '../algorithms/throttler.ts';
import { createReporter } from '../observe/reporter.ts';
import { SentinelError } from '../shared/errors.ts';
import type { StoreErrorMode } from '../shared/types.ts';
import {
  checkFunction,
  checkObject,
  checkOneOf,
  describe,
  fail,
  rejectUnknownOptions,
} from '../shared/validation.ts';
import { MemoryThrottler } from '../stores/memory/memory-throttler.ts';
import { createRedisClient } from '../stores/redis/client.ts';
import { toRedisConnection } from '../stores/redis/connection.ts';
import type { RedisClient } from '../stores/redis/redis-store.ts';
import { RedisThrottler } from '../stores/redis/redis-throttler.ts';
import { type CircuitBreakerOptions, CircuitBreakers } from './circuit-breaker.ts';
import { checkPrefix, redisStore, STORE_ERROR_MODES } from './options.ts';

export type { ThrottlerRecord } from '../algorithms/throttler.ts';

/**
 * Where the hits are counted, and what happens when Redis fails. Without `redis` or `redisUrl`
 * they are counted in this process's memory, as @nestjs/throttler's own storage counts them.
 * @example { redis: new Redis('redis://10.0.0.5:6379') }
 * @example { redisUrl: 'redis://10.0.0.5:6379', onStoreError: 'deny' }
 */
export interface ThrottlerCounterOptions {
  /**
   * An ioredis, iovalkey or node-redis client (`Redis` or `Cluster`). It stays yours to close.
   */
  redis?: RedisClient;
  /**
   * A Redis URL, or several for a Cluster: a client is built with `createRedisClient` (ioredis
   * must be installed) and closed by `close()`.
   * @example 'redis://10.0.0.5:6379'
   */
  redisUrl?: string | readonly string[];
  /**
   * Starts every Redis key: `<prefix>:throttler:{<key>}` and `…:<throttler name>`.
   * @default 'sentinel'
   */
  prefix?: string;
  /**
   * Ms a Redis call waits while Redis sends nothing and this process is free to hear it (see
   * RedisStoreOptions). Past it, `onStoreError` answers. Refused without `redis` or `redisUrl`.
   * @default 50
   */
  timeout?: number;
  /**
   * Ms calls wait for the first Redis connection; after that, calls fail at once until it comes
   * up. Refused without `redis` or `redisUrl`.
   * @default 500
   */
  connectTimeout?: number;
  /**
   * What an increment answers when Redis fails, times out or its breaker is open: `'allow'`
   * admits the request (fail open, as every Sentinel limiter does by default), `'deny'` refuses
   * it as blocked for a second, `'local'` counts it in this process's memory meanwhile.
   * @default 'allow'
   */
  onStoreError?: StoreErrorMode;
  /**
   * Called with every Redis failure, as a SentinelError with a `code`. What it throws becomes a
   * process warning.
   * @default the first failure as a process warning, later ones silent
   */
  onError?: (error: SentinelError) => void;
  /**
   * The circuit breaker in front of Redis, or false for none: once open, increments go straight
   * to `onStoreError` rather than each waiting out `timeout`.
   * @default { failures: 3, cooldownMs: 1000 }
   */
  breaker?: CircuitBreakerOptions | false;
}

const THROTTLER_COUNTER_OPTIONS = {
  redis: true,
  redisUrl: true,
  prefix: true,
  timeout: true,
  connectTimeout: true,
  onStoreError: true,
  onError: true,
  breaker: true,
} as const satisfies Record<keyof ThrottlerCounterOptions, true>;
const OPTION_NAMES = Object.keys(THROTTLER_COUNTER_OPTIONS);

/** What @nestjs/throttler's module takes, which a storage is never given. */
const MODULE_OPTIONS: ReadonlySet<string> = new Set([
  'throttlers',
  'ttl',
  'limit',
  'blockDuration',
  'name',
  'skipIf',
  'ignoreUserAgents',
  'getTracker',
  'generateKey',
  'setHeaders',
  'errorMessage',
  'storage',
]);

/**
 * The longest ttl or blockDuration counted, in ms (about a century): longer ones, Infinity
 * included, are clamped to it, so that every time stays an exact integer in the script.
 */
const LONGEST_MS = 3_155_760_000_000;

/** A key the guard made (a SHA-256 in hex) as it is; any other, from a custom generateKey, hashed. */
function storedKey(key: string): string {
  return /^[0-9a-f]{64}$/.test(key) ? key : createHash('sha256').update(key).digest('hex');
}

/** A number of ms as the scripts take it: whole, and no longer than LONGEST_MS either way. */
function wholeMs(value: number): number {
  return Math.max(-LONGEST_MS, Math.min(LONGEST_MS, Math.ceil(value)));
}

/** The TypeError of an increment called with what the guard never passes. */
function badArgument(argument: string, expected: string, value: unknown): never {
  throw new TypeError(
    `@sentinel/core: increment's \`${argument}\` must be ${expected}, got ${describe(value)}`,
  );
}

function checkNumber(value: unknown, argument: string): asserts value is number {
  if (typeof value !== 'number' || Number.isNaN(value)) badArgument(argument, 'a number', value);
}

/**
 * Counts @nestjs/throttler's hits as its ThrottlerStorageService does, per key and throttler
 * name, with the same blocking rules; on Redis, each increment is one atomic script call on
 * Redis's clock, so processes sharing it admit exactly `limit` between them.
 */
export class ThrottlerCounter {
  readonly #redis: RedisThrottler | undefined;
  /** Counts in memory: without Redis, or for `onStoreError: 'local'` while Redis fails. */
  readonly #memory: MemoryThrottler | undefined;
  readonly #mode: StoreErrorMode;
  readonly #breakers: CircuitBreakers | undefined;
  readonly #report: (error: unknown) => void;
  /** Closes the client built from `redisUrl`. */
  readonly #closeClient: (() => Promise<void>) | undefined;
  #closed = false;

  /** `label` names the package in unknown-option errors and warnings, such as '@sentinel/nestjs'. */
  constructor(options: ThrottlerCounterOptions = {}, label = '@sentinel/core') {
    checkObject(options, 'options');
    // Without this, `ttl` would be told Sentinel's name for it, which no storage takes either.
    const misplaced = Object.keys(options).find((name) => MODULE_OPTIONS.has(name));
    if (misplaced !== undefined) {
      fail(
        misplaced,
        'belongs to ThrottlerModule.forRoot(): the storage counts what the guard asks',
      );
    }
    rejectUnknownOptions(options, OPTION_NAMES, label);
    const { redis, redisUrl, timeout, connectTimeout, breaker } = options;
    const { prefix = 'sentinel', onStoreError = 'allow', onError } = options;
    checkPrefix(prefix);
    checkOneOf(onStoreError, STORE_ERROR_MODES, 'onStoreError');
    if (onError !== undefined) checkFunction(onError, 'onError');
    if (redis !== undefined && redisUrl !== undefined) {
      fail('redisUrl', 'cannot be combined with `redis`');
    }
    this.#mode = onStoreError;
    this.#report = createReporter(onError as ((error: Error) => void) | undefined, label);
    if (redis === undefined && redisUrl === undefined) {
      for (const [name, value] of Object.entries({ timeout, connectTimeout, breaker })) {
        if (value !== undefined) {
          fail(name, 'applies to Redis only: pass `redis` or `redisUrl` with it, or leave it out');
        }
      }
      this.#memory = new MemoryThrottler();
      return;
    }
    this.#breakers = breaker === false ? undefined : new CircuitBreakers(breaker);
    let client = redis;
    if (client === undefined) {
      const built = createRedisClient(redisUrl as string | readonly string[]);
      this.#closeClient = () => toRedisConnection(built).close();
      client = built;
    } else {
      // Checked here so that the error names `redis`, not the store's `client`.
      toRedisConnection(client, 'redis');
    }
    try {
      this.#redis = new RedisThrottler(redisStore(client, timeout, connectTimeout), prefix);
    } catch (error) {
      void this.#closeClient?.();
      throw error;
    }
    this.#memory = onStoreError === 'local' ? new MemoryThrottler() : undefined;
  }

  /**
   * @nestjs/throttler's `increment`: counts a hit of throttler `name` on `key`, `ttl` and
   * `blockDuration` in ms, and answers the record its guard reads, times in seconds. Never
   * rejects for Redis: a failure is reported to `onError` and answered by `onStoreError`.
   */
  async increment(
    key: string,
    ttl: number,
    limit: number,
    blockDuration: number,
    name: string,
  ): Promise<ThrottlerRecord> {
    if (typeof key !== 'string') badArgument('key', 'a string', key);
    checkNumber(ttl, 'ttl');
    checkNumber(limit, 'limit');
    checkNumber(blockDuration, 'blockDuration');
    const id = storedKey(key);
    const throttler = String(name);
    const input = {
      ttl: wholeMs(ttl),
      limit: Math.min(limit, Number.MAX_SAFE_INTEGER),
      blockDuration: Math.max(0, wholeMs(blockDuration)),
    };
    const redis = this.#redis;
    if (redis === undefined)
      return (this.#memory as MemoryThrottler).increment(id, throttler, input);
    if (this.#closed) {
      return this.#degraded(
        id,
        throttler,
        input,
        new SentinelError('STORE_UNAVAILABLE', 'The throttler storage was closed'),
      );
    }
    const breaker = this.#breakers?.of(redis.serverOf(id, throttler));
    if (breaker !== undefined && !breaker.allow(Date.now())) {
      return this.#degraded(id, throttler, input, undefined);
    }
    try {
      const record = await redis.increment(id, throttler, input);
      breaker?.success();
      return record;
    } catch (error) {
      breaker?.failure(Date.now());
      const failure =
        error instanceof SentinelError
          ? error
          : new SentinelError('STORE_FAILED', String((error as Error)?.message ?? error), {
              cause: error,
            });
      return this.#degraded(id, throttler, input, failure);
    }
  }

  /** Stops the Redis calls, failing those in flight, and closes a client built from `redisUrl`. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#redis?.close();
    this.#memory?.close();
    await this.#closeClient?.();
  }

  /** The answer of `onStoreError`, for an increment Redis did not count; reports `error`. */
  #degraded(
    key: string,
    name: string,
    input: { ttl: number; limit: number; blockDuration: number },
    error: SentinelError | undefined,
  ): ThrottlerRecord {
    if (error !== undefined) this.#report(error);
    const timeToExpire = Math.ceil(input.ttl / 1000);
    if (this.#mode === 'deny') {
      return { totalHits: input.limit + 1, timeToExpire, isBlocked: true, timeToBlockExpire: 1 };
    }
    if (this.#mode === 'local')
      return (this.#memory as MemoryThrottler).increment(key, name, input);
    return { totalHits: 0, timeToExpire, isBlocked: false, timeToBlockExpire: 0 };
  }
}
