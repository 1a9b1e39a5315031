// A gateway process for the multi-process suites: one adapter's app on a free port, limited on a shared Redis.
//
// Configured by the environment (see test/harness/gateways.ts): GATEWAY_ADAPTER, REDIS_URL,
// GATEWAY_PREFIX, GATEWAY_LIMIT, GATEWAY_WINDOW and SKEW_MS. It reports `{ port }` over IPC
// once it listens, and shuts down when the parent disconnects, including when the parent dies.
import type { AddressInfo } from 'node:net';
import type { LimiterOptions, Window } from '@sentinel/core';

// The clock skew goes in before anything else loads, so every module sees the skewed clock.
// Modules are therefore imported dynamically below; static imports would run first.
const skewMs = Number(process.env.SKEW_MS ?? 0);
if (skewMs !== 0) {
  const realNow = Date.now;
  Date.now = () => realNow() + skewMs;
}

const [{ Redis }, core, { naiveTokenBucket }, { MULTI_POLICIES }] = await Promise.all([
  import('ioredis'),
  import('@sentinel/core'),
  import('./naive-limiter.ts'),
  import('./gateways.ts'),
]);

const adapter = process.env.GATEWAY_ADAPTER ?? 'express';
const prefix = process.env.GATEWAY_PREFIX ?? 'sentinel';
const limit = Number(process.env.GATEWAY_LIMIT ?? 100);
const window = (process.env.GATEWAY_WINDOW ?? '1h') as Window;
const parsedWindow = core.parseWindow(window);
if (parsedWindow === undefined) throw new Error(`bad GATEWAY_WINDOW: ${window}`);
const windowMs = parsedWindow;

// One connection per gateway with the README's settings; ready before the first request, since
// the naive limiter has no offline queue to wait in.
const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 1,
  autoResendUnfulfilledCommands: false,
});
redis.on('error', () => {});
await new Promise<void>((resolve, reject) => {
  redis.once('ready', resolve);
  setTimeout(() => reject(new Error('Redis was not ready within 10 s')), 10_000).unref();
});

/** Options every limited route shares; atomicity is measured here, not deadlines. */
const base = { redis, prefix, identify: core.byHeader('x-tenant-id'), timeout: 10_000 };
type RouteOptions = Pick<
  LimiterOptions,
  'algorithm' | 'limit' | 'window' | 'policies' | 'clock'
> & {
  group: string;
};
/** GET path → limits. Each route has its own group, so routes never share a budget. */
const routes: Array<{ path: string; options: RouteOptions }> = [
  ...core.ALGORITHMS.map((algorithm) => ({
    path: `/${algorithm}`,
    options: { group: algorithm, algorithm, limit, window },
  })),
  // A documented comparison, not a supported mode: each process's own (skewed) clock.
  ...core.ALGORITHMS.map((algorithm) => ({
    path: `/client-clock/${algorithm}`,
    options: {
      group: `client-clock.${algorithm}`,
      algorithm,
      limit,
      window,
      clock: () => Date.now(),
    },
  })),
  { path: '/multi', options: { group: 'multi', policies: MULTI_POLICIES } },
];

const naive = naiveTokenBucket(redis, limit, windowMs);
/** The read-decide-write limiter on the same Redis: 200 or 429. */
async function naiveStatus(tenant: unknown): Promise<200 | 429> {
  const key = `${prefix}:naive:{${String(tenant)}}`;
  const admitted = await naive(key);
  // The naive limiter sets no TTL; keep the demo's keys from outliving it on a user's Redis.
  redis.pexpire(key, windowMs).catch(() => {});
  return admitted ? 200 : 429;
}
const clock = () => ({ now: Date.now() });

interface Running {
  port: number;
  close(): Promise<void>;
}

async function express(): Promise<Running> {
  const { rateLimit } = await import('@sentinel/express');
  const { express5, serve } = await import('../../packages/express/test/apps.ts');
  const app = express5.app();
  const limiters = routes.map(({ path, options }) => {
    const middleware = rateLimit({ ...base, ...options });
    app.get(path, middleware, (_req, res) => void res.json({ ok: true }));
    return middleware;
  });
  app.get('/naive', async (req, res) => {
    res.status(await naiveStatus(req.headers['x-tenant-id'])).json({});
  });
  app.get('/clock', (_req, res) => void res.json(clock()));
  const served = await serve(app);
  return {
    port: Number(new URL(served.url).port),
    async close() {
      await served.close();
      await Promise.all(limiters.map((limiter) => limiter.close()));
    },
  };
}

async function koa(): Promise<Running> {
  const { rateLimit } = await import('@sentinel/koa');
  const { Koa, serve } = await import('../../packages/koa/test/apps.ts');
  const byPath = new Map(
    routes.map(({ path, options }) => [path, rateLimit({ ...base, ...options })]),
  );
  const app = new Koa();
  app.use(async function route(ctx) {
    const limiter = byPath.get(ctx.path);
    if (limiter) {
      return limiter(ctx, async () => {
        ctx.body = { ok: true };
      });
    }
    if (ctx.path === '/naive') {
      ctx.status = await naiveStatus(ctx.get('x-tenant-id'));
      ctx.body = {};
    } else if (ctx.path === '/clock') ctx.body = clock();
  });
  const served = await serve(app);
  return {
    port: Number(new URL(served.url).port),
    async close() {
      await served.close();
      await Promise.all([...byPath.values()].map((limiter) => limiter.close()));
    },
  };
}

async function fastify(): Promise<Running> {
  const { sentinel } = await import('@sentinel/fastify');
  const { Fastify } = await import('../../packages/fastify/test/framework.ts');
  const app = Fastify();
  await app.register(sentinel, { ...base, global: false });
  for (const { path, options } of routes) {
    app.get(path, { config: { rateLimit: options } }, async () => ({ ok: true }));
  }
  app.get('/naive', async (request, reply) => {
    reply.code(await naiveStatus(request.headers['x-tenant-id']));
    return {};
  });
  app.get('/clock', async () => clock());
  await app.listen({ host: '127.0.0.1', port: 0 });
  return { port: (app.server.address() as AddressInfo).port, close: () => app.close() };
}

const builders: Record<string, () => Promise<Running>> = { express, koa, fastify };
const build = builders[adapter];
if (!build) throw new Error(`unknown GATEWAY_ADAPTER: ${adapter}`);
const running = await build();

let closing = false;
async function shutdown(): Promise<void> {
  if (closing) return;
  closing = true;
  // Whatever hangs, the process is gone within 2 s.
  setTimeout(() => process.exit(0), 2_000).unref();
  await running.close().catch(() => {});
  redis.disconnect();
  process.exit(0);
}
// The parent disconnects to stop this gateway; the channel also closes if the parent dies.
process.on('disconnect', shutdown);
process.on('SIGTERM', shutdown);
if (!process.connected) await shutdown();
process.send?.({ port: running.port });
