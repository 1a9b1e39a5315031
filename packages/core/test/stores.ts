// The stores every semantic test runs against: memory, and Redis through ioredis 6 and 5.

import { connect, uniquePrefix } from '../../../test/harness/clients.ts';
import { failOnError } from '../../../test/harness/store-errors.ts';
import {
  createLimiter,
  type Limiter,
  type LimiterOptions,
  MemoryStore,
  RedisStore,
} from '../src/index.ts';

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

/**
 * A limiter on the named store, with a prefix of its own and default options. Any store error
 * fails the test instead of degrading quietly; the deadline has suites of its own.
 */
export function limiterOn(
  name: StoreName,
  options: Omit<LimiterOptions, 'store' | 'redis'>,
): Limiter {
  const store =
    name === 'memory'
      ? new MemoryStore()
      : new RedisStore({
          client: connect(name === 'redis (ioredis 6)' ? 'ioredis 6' : 'ioredis 5'),
        });
  return createLimiter({
    prefix: uniquePrefix('semantics'),
    onError: failOnError,
    ...options,
    store,
  });
}
