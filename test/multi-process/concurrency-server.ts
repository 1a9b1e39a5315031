// A gateway process for the concurrency suites: one adapter's app, limited by a concurrency policy
// on a shared Redis, whose slow handlers count themselves in Redis while they run.
//
// Configured by the environment (concurrency-fleet.ts sets it): SERVER_ADAPTER (express, koa or
// fastify), REDIS_URL, SERVER_PREFIX, SERVER_CONCURRENCY, SERVER_LEASE (optional), SERVER_SLOW_MS,
// SERVER_COUNTERS and SERVER_SHED (optional: `shed.concurrency`). The app is the conformance
// suite's (test/adapters), limited app-wide with the adapter's default options but for `redisUrl`,
// `prefix`, `concurrency`, `lease` and `shed` (with its default reserve of 0.2): every
// request is identified by its client IP, so all of a test's requests are one identity. Routes,
// all limited by the same policy:
//
//   GET /       answers at once
//   GET /slow   runs SERVER_SLOW_MS (300) ms before it answers
//   GET /hold   runs 60 s, longer than any test waits, before it answers
//
// While /slow or /hold runs, the handler counts itself in Redis, so the test can see how many
// handlers run at once across every process: INCR `<counters>:running` on entry (and DECR on
// exit), INCR `<counters>:entered`, and ZADD GT of the INCR's result to member `most` of the
// sorted set `<counters>:most`, which keeps the highest count seen. Two plain commands, no
// script: the counts cannot be off by what the limiter's own scripts do.
//
// The process reports `{ url }` over IPC once it listens, and shuts down when the parent
// disconnects, including when the parent dies.
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import type { HttpLimiterOptions } from '../../packages/core/src/index.ts';
import type { AdapterDriver } from '../adapters/driver.ts';

const adapter = process.env.SERVER_ADAPTER ?? 'express';
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const prefix = process.env.SERVER_PREFIX ?? 'sentinel';
const concurrency = Number(process.env.SERVER_CONCURRENCY ?? 5);
const lease = process.env.SERVER_LEASE as HttpLimiterOptions['lease'];
const slowMs = Number(process.env.SERVER_SLOW_MS ?? 300);
const shed = process.env.SERVER_SHED;
const counters = process.env.SERVER_COUNTERS ?? `${prefix}:test`;
const HOLD_MS = 60_000;

const drivers: Record<string, () => Promise<{ driver: AdapterDriver }>> = {
  express: () => import('../adapters/express.ts'),
  koa: () => import('../adapters/koa.ts'),
  fastify: () => import('../adapters/fastify.ts'),
};
const load = drivers[adapter];
if (!load) throw new Error(`unknown SERVER_ADAPTER: ${adapter}`);
const { driver } = await load();

// The counters' own connection, apart from the limiter's.
const counting = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
counting.on('error', () => {});

/** What /slow and /hold do once admitted: count themselves in, wait, count themselves out. */
async function run(ms: number): Promise<void> {
  const running = await counting.incr(`${counters}:running`);
  await Promise.all([
    counting.incr(`${counters}:entered`),
    counting.zadd(`${counters}:most`, 'GT', running, 'most'),
  ]);
  try {
    await sleep(ms);
  } finally {
    await counting.decr(`${counters}:running`);
  }
}

const app = await driver.start({
  options: {
    redisUrl,
    prefix,
    concurrency,
    ...(lease !== undefined && { lease }),
    ...(shed !== undefined && { shed: { concurrency: Number(shed) } }),
  },
  routes: [
    { path: '/slow', work: () => run(slowMs) },
    { path: '/hold', work: () => run(HOLD_MS) },
  ],
});

let closing = false;
async function shutdown(): Promise<void> {
  if (closing) return;
  closing = true;
  // Whatever hangs (a /hold handler keeps its connection open), the process is gone within 2 s.
  setTimeout(() => process.exit(0), 2_000).unref();
  await app.close().catch(() => {});
  counting.disconnect();
  process.exit(0);
}
// The parent disconnects to stop this process; the channel also closes if the parent dies.
process.on('disconnect', shutdown);
process.on('SIGTERM', shutdown);
if (!process.connected) await shutdown();
process.send?.({ url: app.url });
