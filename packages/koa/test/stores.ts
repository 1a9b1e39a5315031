// The stores the Koa suites run on, and cleanup for the apps and limiters a test starts.
import { afterEach } from 'vitest';
import { connect, uniquePrefix } from '../../../test/harness/clients.ts';
import type { RateLimitMiddleware, RateLimitOptions } from '../src/index.ts';
import type { Served } from './apps.ts';

export const STORES = ['memory', 'redis'] as const;
export type StoreName = (typeof STORES)[number];

let redis: ReturnType<typeof connect> | undefined;
const open: Array<Served | RateLimitMiddleware> = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((item) => item.close()));
});

/** Closes `item` after the test. */
export function closeLater<T extends Served | RateLimitMiddleware>(item: T): T {
  open.push(item);
  return item;
}

/** Store options for a fresh budget on the named store: Redis with a prefix of its own. */
export function storeOptions(store: StoreName): Partial<RateLimitOptions> {
  if (store === 'memory') return {};
  redis ??= connect();
  return { redis, prefix: uniquePrefix('koa') };
}
