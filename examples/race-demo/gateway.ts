// A gateway process of the race demo: one adapter's app on a free port, limited on a shared Redis.
//
// Runs on Node, and for the Hono and fetch adapters on Bun and Deno too (GATEWAY_ADAPTER hono or
// fetch). Configured by the environment (fleet.ts sets it): GATEWAY_ADAPTER, REDIS_URL, GATEWAY_PREFIX,
// GATEWAY_LIMIT, GATEWAY_WINDOW and SKEW_MS. SKEW_MS simulates a gateway whose clock is off by
// that many milliseconds: its `/<algorithm>` routes still share the limit exactly with the other
// gateways, which shows that Sentinel decides on Redis's clock, while its `/gateway-clock/...`
// routes, atomic scripts on this process's clock, do not. The process reports `{ port }` over IPC once it
// listens (on stdout under Bun and Deno), and shuts down when the parent disconnects (closes its
// stdin), including when the parent dies.
import { createServer, type RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Decision, LimiterOptions, Window } from '@sentinel/core';

// The clock skew goes in before anything else loads, so every module sees the skewed clock.
// Modules are therefore imported dynamically below; static imports would run first.
const skewMs = Number(process.env.SKEW_MS ?? 0);
if (skewMs !== 0) {
  const realNow = Date.now;
  Date.now = () => realNow() + skewMs;
}

const [
  { Redis },
  core,
  { naiveTokenBucket },
  { GATEWAY_CLOCK_ALGORITHMS, gatewayClockLimiters },
  { MULTI_POLICIES },
] = await Promise.all([
  import('ioredis'),
  import('@sentinel/core'),
  import('./naive-limiter.ts'),
  import('./gateway-clock-limiter.ts'),
  import('./fleet.ts'),
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

/** Options every limited route shares: Sentinel's defaults, as a user would deploy them. */
const base = { redis, prefix, identify: core.byHeader('x-tenant-id', { trusted: true }) };
type RouteOptions = Pick<LimiterOptions, 'algorithm' | 'limit' | 'window' | 'policies'> & {
  group: string;
};
/** GET path → limits. Each route has its own group, so routes never share a budget. */
const routes: Array<{ path: string; options: RouteOptions }> = [
  ...core.ALGORITHMS.map((algorithm) => ({
    path: `/${algorithm}`,
    options: { group: algorithm, algorithm, limit, window },
  })),
  { path: '/multi', options: { group: 'multi', policies: MULTI_POLICIES } },
];

/**
 * What an admitted request gets: `degraded` names the store-error mode that decided instead of
 * Redis, so that a race can tell an atomic admission from one Redis never saw.
 */
function admitted(decision: Decision | null | undefined) {
  return { ok: true, degraded: decision?.degraded ?? null };
}

const gatewayClock = gatewayClockLimiters(redis, limit, windowMs);
/**
 * The comparisons on the same Redis, by path: `/naive` reads, decides in JavaScript and writes
 * back; `/gateway-clock/<algorithm>` decides atomically on this process's clock.
 */
const comparisons = new Map<string, (key: string) => Promise<boolean>>([
  ['/naive', naiveTokenBucket(redis, limit, windowMs)],
  ...GATEWAY_CLOCK_ALGORITHMS.map(
    (algorithm) => [`/gateway-clock/${algorithm}`, gatewayClock[algorithm]] as const,
  ),
]);
/** A comparison's answer for a tenant: 200 or 429. */
async function comparisonStatus(path: string, tenant: unknown): Promise<200 | 429> {
  const consume = comparisons.get(path);
  if (consume === undefined) throw new Error(`no comparison at ${path}`);
  const key = `${prefix}:${path.slice(1)}:{${String(tenant)}}`;
  const allowed = await consume(key);
  // The naive limiter sets no TTL; keep the demo's keys from outliving it on a user's Redis.
  redis.pexpire(key, windowMs).catch(() => {});
  return allowed ? 200 : 429;
}
const clock = () => ({ now: Date.now() });

interface Running {
  port: number;
  close(): Promise<void>;
}

/** Listens on a free port of 127.0.0.1; close() also drops kept-alive connections. */
async function serve(listener: RequestListener): Promise<Running> {
  const server = createServer(listener);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}

async function express(): Promise<Running> {
  const [{ default: createApp }, { rateLimit }] = await Promise.all([
    import('express'),
    import('@sentinel/express'),
  ]);
  const app = createApp();
  const limiters = routes.map(({ path, options }) => {
    const middleware = rateLimit({ ...base, ...options });
    app.get(path, middleware, (req, res) => void res.json(admitted(req.rateLimit)));
    return middleware;
  });
  for (const path of comparisons.keys()) {
    app.get(path, async (req, res) => {
      res.status(await comparisonStatus(path, req.headers['x-tenant-id'])).json({});
    });
  }
  app.get('/clock', (_req, res) => void res.json(clock()));
  const served = await serve(app);
  return {
    port: served.port,
    async close() {
      await served.close();
      await Promise.all(limiters.map((limiter) => limiter.close()));
    },
  };
}

async function koa(): Promise<Running> {
  const [{ default: Koa }, { rateLimit }] = await Promise.all([
    import('koa'),
    import('@sentinel/koa'),
  ]);
  const byPath = new Map(
    routes.map(({ path, options }) => [path, rateLimit({ ...base, ...options })]),
  );
  const app = new Koa();
  app.use(async function route(ctx) {
    const limiter = byPath.get(ctx.path);
    if (limiter) {
      return limiter(ctx, async () => {
        ctx.body = admitted(ctx.state.rateLimit);
      });
    }
    if (comparisons.has(ctx.path)) {
      ctx.status = await comparisonStatus(ctx.path, ctx.get('x-tenant-id'));
      ctx.body = {};
    } else if (ctx.path === '/clock') ctx.body = clock();
  });
  const served = await serve(app.callback());
  return {
    port: served.port,
    async close() {
      await served.close();
      await Promise.all([...byPath.values()].map((limiter) => limiter.close()));
    },
  };
}

async function fastify(): Promise<Running> {
  const [{ default: Fastify }, { sentinel }] = await Promise.all([
    import('fastify'),
    import('@sentinel/fastify'),
  ]);
  const app = Fastify();
  await app.register(sentinel, { ...base, global: false });
  for (const { path, options } of routes) {
    app.get(path, { config: { rateLimit: options } }, async (request) =>
      admitted(request.rateLimit),
    );
  }
  for (const path of comparisons.keys()) {
    app.get(path, async (request, reply) => {
      reply.code(await comparisonStatus(path, request.headers['x-tenant-id']));
      return {};
    });
  }
  app.get('/clock', async () => clock());
  await app.listen({ host: '127.0.0.1', port: 0 });
  return { port: (app.server.address() as AddressInfo).port, close: () => app.close() };
}

/** A fetch API handler served by the runtime this process runs on: Node (@hono/node-server), Bun or Deno. */
async function serveFetch(
  fetch: (request: Request, ...rest: unknown[]) => Response | Promise<Response>,
): Promise<Running> {
  const runtime = globalThis as {
    Bun?: { serve(options: object): { port: number; stop(force: boolean): Promise<void> } };
    Deno?: {
      serve(
        options: object,
        handler: typeof fetch,
      ): { addr: { port: number }; shutdown(): Promise<void> };
    };
  };
  if (runtime.Bun) {
    const server = runtime.Bun.serve({ hostname: '127.0.0.1', port: 0, fetch });
    return { port: server.port, close: () => server.stop(true) };
  }
  if (runtime.Deno) {
    const server = runtime.Deno.serve({ hostname: '127.0.0.1', port: 0, onListen() {} }, fetch);
    return { port: server.addr.port, close: () => server.shutdown() };
  }
  const { getRequestListener } = await import('@hono/node-server');
  return serve(getRequestListener(fetch as Parameters<typeof getRequestListener>[0]));
}

async function hono(): Promise<Running> {
  const [{ Hono }, { rateLimit }] = await Promise.all([import('hono'), import('@sentinel/hono')]);
  const app = new Hono();
  const limiters = routes.map(({ path, options }) => {
    const middleware = rateLimit({ ...base, ...options });
    app.get(path, middleware, (c) => c.json(admitted(c.get('rateLimit'))));
    return middleware;
  });
  for (const path of comparisons.keys()) {
    app.get(path, async (c) =>
      c.json({}, await comparisonStatus(path, c.req.header('x-tenant-id'))),
    );
  }
  app.get('/clock', (c) => c.json(clock()));
  const served = await serveFetch((request, ...rest) => app.fetch(request, rest[0]));
  return {
    port: served.port,
    async close() {
      await served.close();
      await Promise.all(limiters.map((limiter) => limiter.close()));
    },
  };
}

async function fetchHandlers(): Promise<Running> {
  const { decisionOf, withRateLimit } = await import('@sentinel/fetch');
  const byPath = new Map(
    routes.map(({ path, options }) => [
      path,
      withRateLimit(
        (request: Request, ..._rest: unknown[]) => Response.json(admitted(decisionOf(request))),
        {
          ...base,
          ...options,
        },
      ),
    ]),
  );
  const served = await serveFetch(async (request: Request, ...rest: unknown[]) => {
    const path = new URL(request.url).pathname;
    const limited = byPath.get(path);
    if (limited) return limited(request, ...rest);
    if (comparisons.has(path)) {
      const status = await comparisonStatus(path, request.headers.get('x-tenant-id'));
      return Response.json({}, { status });
    }
    return Response.json(clock());
  });
  return {
    port: served.port,
    async close() {
      await served.close();
      await Promise.all([...byPath.values()].map((limited) => limited.close()));
    },
  };
}

const builders: Record<string, () => Promise<Running>> = {
  express,
  koa,
  fastify,
  hono,
  fetch: fetchHandlers,
};
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
process.on('SIGTERM', shutdown);
if (process.send) {
  // The parent disconnects to stop this gateway; the channel also closes if the parent dies.
  process.on('disconnect', shutdown);
  if (!process.connected) await shutdown();
  process.send({ port: running.port });
} else {
  // Bun and Deno, started without an IPC channel: the port goes out on stdout, and the parent
  // closes stdin to stop this gateway (it also closes if the parent dies).
  process.stdin.on('end', shutdown).on('close', shutdown).resume();
  process.stdout.write(`${JSON.stringify({ port: running.port })}\n`);
}
