// Apps under fault: an adapter's app on a Redis of the test's own, and the waits scenarios share.
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach } from 'vitest';
import { byHeader, type HttpLimiterOptions, SentinelError } from '../../packages/core/src/index.ts';
import type { AdapterDriver, RunningApp } from '../adapters/driver.ts';
import { driver as express } from '../adapters/express.ts';
import { driver as fastify } from '../adapters/fastify.ts';
import { driver as koa } from '../adapters/koa.ts';
import { uniquePrefix } from '../harness/clients.ts';
import { type RedisProcess, startRedis } from '../harness/redis-server.ts';
import { waitFor } from '../harness/wait-for.ts';
import { get, identities, now, type Sample, startLoad } from './load.ts';

export const DRIVERS: readonly AdapterDriver[] = [express, koa, fastify];

const servers: RedisProcess[] = [];
const apps: RunningApp[] = [];

afterEach(async () => {
  // A paused server would leave the apps' clients waiting on it: resume before closing.
  for (const server of servers) server.resume();
  await Promise.all(apps.splice(0).map((app) => app.close()));
  await Promise.all(servers.splice(0).map((server) => server.stop()));
});

/** A redis-server of the test's own, stopped (and resumed first) after the test. */
export async function ownRedis(): Promise<RedisProcess> {
  const server = await startRedis();
  servers.push(server);
  return server;
}

/** A failure the adapter reported to onError, with how long its decision took. */
export interface Failure {
  error: Error;
  /** The request's x-user. */
  user: string;
  /** Milliseconds from the request's identification (just before the store call) to its report. */
  ms: number;
}

export interface FaultApp {
  url: string;
  prefix: string;
  /** Every failure the adapter reported to onError, in order. */
  failures: Failure[];
  /** One GET as `user`. */
  get(user: string): Promise<Sample>;
  close(): Promise<void>;
}

const byUser = byHeader('x-user', { trusted: true });
const DEFAULT_POLICY = { limit: 5, window: '1h' } as const;

/**
 * The driver's app on `server`, through the client the limiter builds from `redisUrl` (the
 * recommended settings), with default options (the 50 ms deadline), limiting each x-user to 5
 * an hour unless told otherwise. It is proven healthy (connected, scripts loaded) before it is returned.
 */
export async function faultApp(
  driver: AdapterDriver,
  server: RedisProcess,
  options: Partial<HttpLimiterOptions> = {},
): Promise<FaultApp> {
  const failures: Failure[] = [];
  const prefix = options.prefix ?? uniquePrefix(`faults-${driver.name}`);
  const identify = options.identify ?? byUser;
  // Identification comes just before the store call, and onError just after its decision.
  const identifiedAt = new WeakMap<object, number>();
  const running = await driver.start({
    options: {
      redisUrl: server.url,
      prefix,
      ...(options.tiers === undefined && options.policies === undefined && DEFAULT_POLICY),
      ...options,
      identify(req) {
        identifiedAt.set(req, now());
        return identify(req);
      },
      onError(error, req) {
        const user = String(req.headers['x-user']);
        failures.push({ error, user, ms: now() - (identifiedAt.get(req) ?? Number.NaN) });
      },
    },
  });
  let open = true;
  const close = async () => {
    if (!open) return;
    open = false;
    await running.close();
  };
  apps.push({ url: running.url, close });
  const app: FaultApp = {
    url: running.url,
    prefix,
    failures,
    get: (user) => get(running.url, user),
    close,
  };
  await waitFor(async () => (await app.get('warm-up')).degraded === undefined);
  failures.length = 0;
  return app;
}

/** The codes of the failures that are SentinelErrors, and the messages of any others. */
export function codes(failures: readonly Failure[]): string[] {
  return [
    ...new Set(
      failures.map(({ error }) => (error instanceof SentinelError ? error.code : error.message)),
    ),
  ];
}

export { waitFor };

/**
 * Kills Redis for `downMs` under 20 requests in flight over 50 identities of limit 5 (a mix of
 * 200s and 429s while Redis is up), restarts it, and waits until the app limits again. Times
 * are on the load's clock (`now()`).
 */
export async function outage(app: FaultApp, server: RedisProcess, downMs: number) {
  const load = startLoad(app.url, {
    concurrency: 20,
    maxMs: 10_000,
    maxRequests: 100_000,
    users: identities('load', 50),
  });
  await sleep(400);
  await server.stop();
  const stoppedAt = now();
  await sleep(downMs);
  const restartingAt = now();
  await server.restart();
  const restartedAt = now();
  const resumedAfter = await untilLimiting(app, 5, restartedAt);
  await sleep(200);
  const samples = await load.stop();
  return { samples, stoppedAt, restartingAt, restartedAt, resumedAfter };
}

/**
 * Polls until the app limits again through Redis, and returns the ms from `since` until an
 * identity driven over its limit of `limit` gets its 429 from a decision that is not degraded.
 * Each attempt uses a fresh identity, so that a degraded attempt leaves nothing behind.
 */
export async function untilLimiting(
  app: FaultApp,
  limit: number,
  since: number,
  ms = 5_000,
): Promise<number> {
  for (let attempt = 0; now() - since < ms; attempt++) {
    const user = `resume-${attempt}`;
    const first = await app.get(user);
    if (first.status !== 200 || first.degraded !== undefined) {
      await sleep(10);
      continue;
    }
    const rest: Sample[] = [];
    for (let i = 0; i < limit; i++) rest.push(await app.get(user));
    const refused = rest.at(-1);
    const healthy = rest.every((s) => s.degraded === undefined);
    if (healthy && refused?.status === 429 && rest.slice(0, -1).every((s) => s.status === 200)) {
      return now() - since;
    }
  }
  throw new Error(`the app did not limit through Redis within ${ms} ms`);
}
