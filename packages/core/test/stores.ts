// The stores every semantic test runs against: memory, and Redis through ioredis 6 and 5.

import { connect, uniquePrefix } from '../../../test/harness/clients.ts';
import { failOnError } from '../../../test/harness/store-errors.ts';
import {
  createLimiter,
  type Limiter,
  type LimiterOptions,
  MemoryStore,
  type RedisClient,
  RedisStore,
  type Store,
} from '../src/index.ts';
import { runScriptsOn } from '../src/stores/redis/script-clock.ts';

export const STORES = ['memory', 'redis (ioredis 6)', 'redis (ioredis 5)'] as const;
export type StoreName = (typeof STORES)[number];

/** A clock the test moves by hand; starts at a fixed, window-aligned instant. */
export function manualClock(start = Date.UTC(2026, 0, 1)) {
  let now = start;
  return {
    now: () => now,
    advance(ms: number) {
      now += ms;
    },
    set(ms: number) {
      now = ms;
    },
  };
}

export type Clock = ReturnType<typeof manualClock>;

/** A limiter's options in these tests: `clock`, if given, is its store's. */
export type TestLimiterOptions = Omit<LimiterOptions, 'store' | 'redis'> & {
  clock?: () => number;
};

/**
 * A limiter's store options on `client`: `redis`, deciding on Redis's clock; or with `clock`, a
 * RedisStore whose scripts run on it instead, through the seam only this repository's tests
 * reach (script-clock.ts), so that a test steps time. Such calls each go alone, never batched.
 */
export function onRedis(
  client: RedisClient,
  { clock, timeout }: { clock?: (() => number) | undefined; timeout?: number } = {},
): Pick<LimiterOptions, 'redis' | 'store' | 'timeout'> {
  const deadline = timeout === undefined ? {} : { timeout };
  if (clock === undefined) return { redis: client, ...deadline };
  return { store: runScriptsOn(new RedisStore({ client, ...deadline }), clock) };
}

/**
 * A new store of the named kind. With `clock`, a memory store decides on it, as a user's test
 * would make one; a Redis store runs its scripts on it through the seam only this repository's
 * tests reach (script-clock.ts), so that the scripts are checked at the times a test steps to.
 */
export function storeOn(name: StoreName, clock?: () => number): Store {
  if (name === 'memory') return new MemoryStore(clock === undefined ? {} : { clock });
  const store = new RedisStore({
    client: connect(name === 'redis (ioredis 6)' ? 'ioredis 6' : 'ioredis 5'),
  });
  return clock === undefined ? store : runScriptsOn(store, clock);
}

/**
 * A limiter on the named store, with a prefix of its own and default options. Any store error
 * fails the test instead of degrading quietly; the deadline has suites of its own.
 */
export function limiterOn(name: StoreName, { clock, ...options }: TestLimiterOptions): Limiter {
  return createLimiter({
    prefix: uniquePrefix('semantics'),
    onError: failOnError,
    ...options,
    store: storeOn(name, clock),
  });
}
