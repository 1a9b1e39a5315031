// The conformance matrix (each adapter × memory and Redis) and the HTTP helpers scenarios share.
import { connect as connectSocket } from 'node:net';
import type { Redis } from 'ioredis';
import { afterEach, describe, expect } from 'vitest';
import { type HttpLimiterOptions, MemoryStore } from '../../packages/core/src/index.ts';
import { onRedis } from '../../packages/core/test/stores.ts';
import type { AdapterDriver, AppSpec, RouteBody } from '../adapters/driver.ts';
import { driver as express } from '../adapters/express.ts';
import { driver as fastify } from '../adapters/fastify.ts';
import { driver as fetchDriver } from '../adapters/fetch.ts';
import { driver as hono } from '../adapters/hono.ts';
import { driver as koa } from '../adapters/koa.ts';
import { nestExpress, nestFastify } from '../adapters/nestjs.ts';
import { type AppClient, clientOf, type Reply } from '../adapters/requests.ts';
import { connect, uniquePrefix } from '../harness/clients.ts';

/** Every adapter the suite covers; each scenario runs against all of them. */
export const ADAPTERS: readonly AdapterDriver[] = [
  express,
  koa,
  fastify,
  hono,
  fetchDriver,
  nestExpress,
  nestFastify,
];

export const STORES = ['memory', 'redis'] as const;
export type StoreName = (typeof STORES)[number];

/**
 * The store part of the options, with a prefix no other test uses, and an onError that fails the
 * test for any error its limiters report: a test that expects errors passes an onError of its own.
 */
export interface StoreSetup {
  options: Pick<HttpLimiterOptions, 'store' | 'redis' | 'prefix' | 'timeout'> & {
    onError: (error: Error) => void;
  };
  prefix: string;
  /** The client the limiter uses, for the Redis store: to SCAN what it wrote. */
  redis?: Redis;
}

/**
 * Redis's deadline in these scenarios, unless one asks for another. They run two files at a time
 * beside the other suites, and on a loaded machine a reply waits now and then for a core: beside
 * the conformance suite and two CPU hogs, a script call measured 0.2 ms typically, 15 ms at the
 * 99th percentile and up to 180 ms, so the default 50 ms deadline passed a few times per run, and
 * the failure mode answered those requests (admitted, degraded) while the scenario counted them
 * as the store's. Their subject is what an adapter answers; the deadline has suites of its own,
 * run alone. 1 s is ten times the usual worst wait there (about 100 ms), and still catches a hang.
 */
export const REDIS_TIMEOUT_MS = 1_000;

let client: Redis | undefined;
const stores: MemoryStore[] = [];
const apps: Array<{ close(): Promise<void> }> = [];
/** What the current test's limiters reported to the onError of its store setups. */
let reported: string[] = [];

afterEach(async () => {
  // Copied before the apps close: closing a store fails the calls still in flight (a release
  // after the last response), which is the teardown's doing, not the test's. Those go to the old
  // list, which the test's onErrors still hold and nothing reads again.
  const errors = [...reported];
  reported = [];
  await Promise.all(apps.splice(0).map((app) => app.close()));
  for (const store of stores.splice(0)) store.close();
  expect(errors, 'errors reported to onError: decisions the failure mode made').toEqual([]);
});

/** An onError that records into the current test's list, which the test then fails on. */
function failTestOnError(): (error: Error) => void {
  const errors = reported;
  return (error) => {
    const code = (error as { code?: string }).code;
    errors.push(code === undefined ? error.message : `${code}: ${error.message}`);
  };
}

/**
 * A fresh store. The memory store is one instance the app's limiters share, as a user would pass
 * it, so that groups and per-route limiters can meet. With `clock`, the store decides on it: the
 * memory store's own option, and for Redis the seam only this repository's tests reach
 * (script-clock.ts), so that both stores answer the same times. `timeout` is Redis's deadline,
 * REDIS_TIMEOUT_MS unless given.
 */
export function useStore(
  name: StoreName,
  { clock, timeout }: { clock?: () => number; timeout?: number } = {},
): StoreSetup {
  const prefix = uniquePrefix('conformance');
  if (name === 'memory') {
    const store = new MemoryStore(clock === undefined ? {} : { clock });
    stores.push(store);
    return { options: { store, prefix, onError: failTestOnError() }, prefix };
  }
  client ??= connect();
  const redis = onRedis(client, { clock, timeout: timeout ?? REDIS_TIMEOUT_MS });
  return { options: { ...redis, prefix, onError: failTestOnError() }, prefix, redis: client };
}

/** The Redis client of a Redis store setup. */
export function redisOf(store: StoreSetup): Redis {
  if (!store.redis) throw new Error('this scenario needs the Redis store');
  return store.redis;
}

/** Runs `scenarios` once per adapter and store, as `<adapter> › <store> store › ...`. */
export function conformance(
  scenarios: (driver: AdapterDriver, store: StoreName) => void,
  storeNames: readonly StoreName[] = STORES,
): void {
  for (const driver of ADAPTERS) {
    describe(driver.name, () => {
      for (const store of storeNames) describe(`${store} store`, () => scenarios(driver, store));
    });
  }
}

export type { Reply };

export type App = AppClient;

/** Builds the driver's app, closed after the test. */
export async function startApp(driver: AdapterDriver, spec: AppSpec): Promise<App> {
  const built = await driver.build(spec);
  apps.push(built);
  return clientOf(built);
}

/** Sends `count` requests one after another and returns the replies. */
export async function getMany(
  app: App,
  count: number,
  path = '/',
  headers: Record<string, string> = {},
): Promise<Reply[]> {
  const replies: Reply[] = [];
  for (let i = 0; i < count; i++) replies.push(await app.get(path, headers));
  return replies;
}

/** The decision a route exposed (`req.rateLimit` and its kin), from a 200 reply. */
export function exposed(reply: Reply | undefined): RouteBody['rateLimit'] | undefined {
  return (reply?.body as RouteBody | undefined)?.rateLimit;
}

/** Response header names that belong to any RateLimit format. */
export function rateLimitHeaderNames(headers: Headers): string[] {
  return [...headers.keys()].filter((name) => /^(x-)?ratelimit/i.test(name));
}

/**
 * A GET written byte for byte on a socket, for header values HTTP clients refuse to send (CR,
 * LF, raw UTF-8). Resolves with the status code, or 0 when the server closed without answering.
 */
export function rawGet(url: string, path: string, headerLines: readonly Buffer[]): Promise<number> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connectSocket(Number(port), hostname);
    const chunks: Buffer[] = [];
    socket.setTimeout(10_000, () => socket.destroy(new Error('no answer within 10 s')));
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => {
      const head = /^HTTP\/1\.[01] (\d{3})/.exec(Buffer.concat(chunks).toString('latin1'));
      resolve(head ? Number(head[1]) : 0);
    });
    socket.write(
      Buffer.concat([
        Buffer.from(`GET ${path} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nConnection: close\r\n`),
        ...headerLines.flatMap((line) => [line, Buffer.from('\r\n')]),
        Buffer.from('\r\n'),
      ]),
    );
  });
}

/** Every key under `prefix`, by SCAN. */
export async function scanKeys(redis: Redis, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    keys.push(...batch);
  } while (cursor !== '0');
  return keys;
}
