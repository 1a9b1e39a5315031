// The stores the Hono and fetch suites run on, and cleanup for the servers and limiters a test starts.
import { afterEach, expect } from 'vitest';
import { connect, uniquePrefix } from '../../../test/harness/clients.ts';
import type { RedisClient } from '../src/index.ts';

export const STORES = ['memory', 'redis'] as const;
export type StoreName = (typeof STORES)[number];

let redis: ReturnType<typeof connect> | undefined;
const open: Array<{ close(): Promise<void> }> = [];
/** What the current test's limiters reported to the onError of their store options. */
const reported: string[] = [];

afterEach(async () => {
  // Taken before the limiters close: closing a store fails the calls still in flight (the
  // release of a slot after the last response), which is the teardown's doing, not the test's.
  const errors = reported.splice(0);
  await Promise.all(open.splice(0).map((item) => item.close()));
  reported.splice(0);
  expect(errors, 'errors reported to onError: decisions the failure mode made').toEqual([]);
});

/** Closes `item` (a server, a middleware) after the test. */
export function closeLater<T extends { close(): Promise<void> }>(item: T): T {
  open.push(item);
  return item;
}

/** The store part of a limiter's options, which any Env's options take. */
export interface StoreOptions {
  redis?: RedisClient;
  prefix?: string;
  timeout?: number;
  onError: (error: Error) => void;
}

/**
 * Store options for a fresh budget on the named store: Redis with a prefix of its own. Any
 * error the limiter reports fails the test, rather than a failure mode deciding quietly; and
 * Redis gets 1 s to answer, not 50 ms, since these suites run beside others on a loaded machine
 * where a reply now and then waits 100 ms for a core. The deadline has suites of its own.
 */
export function storeOptions(store: StoreName, label = 'hono'): StoreOptions {
  const onError = (error: Error) => {
    const code = (error as { code?: string }).code;
    reported.push(code === undefined ? error.message : `${code}: ${error.message}`);
  };
  if (store === 'memory') return { onError };
  redis ??= connect();
  return { redis, prefix: uniquePrefix(label), timeout: 1_000, onError };
}
