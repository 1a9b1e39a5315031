// The Hono app under load: a tiny JSON answer behind the variant's limiter, if any, served by
// @hono/node-server on Node and by `Bun.serve` on Bun.
import { serve } from '@hono/node-server';
import { rateLimit as sentinel } from '@sentinel/hono';
import { Hono, type MiddlewareHandler } from 'hono';
import { type RedisClient, RedisStore, rateLimiter } from 'hono-rate-limiter';
import type { Redis } from 'ioredis';
import { connect, createFloor } from './redis-clients.ts';
import { sentinelMiddleware } from './sentinel-options.ts';
import { API_KEY_HEADER, HUGE_LIMIT, type Running, type Variant, WINDOW_MS } from './variants.ts';

/**
 * The client hono-rate-limiter's RedisStore takes (the calls of @upstash/redis, its documented
 * client), over ioredis, as its documentation asks of any other client: one command each.
 */
function storeClient(redis: Redis): RedisClient {
  return {
    scriptLoad: (script) => redis.script('LOAD', script) as Promise<string>,
    evalsha: <TArgs extends unknown[], TData>(sha1: string, keys: string[], args: TArgs) =>
      redis.evalsha(sha1, keys.length, ...keys, ...(args as string[])) as Promise<TData>,
    decr: (key) => redis.decr(key),
    del: (key) => redis.del(key),
  };
}

async function limiterOf(
  variant: Variant,
  redisUrl: string,
): Promise<{ use?: MiddlewareHandler; close(): Promise<unknown> }> {
  switch (variant) {
    case 'bare':
      return { close: async () => {} };
    case 'floor': {
      const floor = await createFloor(redisUrl);
      const use: MiddlewareHandler = async function floorMiddleware(c, next) {
        await floor.call({ headers: { [API_KEY_HEADER]: c.req.header(API_KEY_HEADER) } });
        await next();
      };
      return { use, close: floor.close };
    }
    case 'sentinel':
    case 'sentinel-by-key':
    case 'sentinel-own-client': {
      return sentinelMiddleware(variant, redisUrl, sentinel);
    }
    case 'hono-rate-limiter': {
      const redis = await connect(redisUrl);
      return {
        // It has no default key: its documentation keys by a header, as Sentinel's `identify` does.
        use: rateLimiter({
          windowMs: WINDOW_MS,
          limit: HUGE_LIMIT,
          keyGenerator: (c) => c.req.header(API_KEY_HEADER) ?? '',
          store: new RedisStore({ client: storeClient(redis) }),
        }),
        close: () => redis.quit(),
      };
    }
    default:
      throw new TypeError(`Hono has no variant ${variant}`);
  }
}

async function honoApp(variant: Variant, redisUrl: string) {
  const limiter = await limiterOf(variant, redisUrl);
  const app = new Hono();
  if (limiter.use) app.use(limiter.use);
  app.get('/', (c) => c.json({ ok: true }));
  return { app, close: limiter.close };
}

export async function serveHono(variant: Variant, redisUrl: string): Promise<Running> {
  const { app, close } = await honoApp(variant, redisUrl);
  const { server, port } = await new Promise<{ server: ReturnType<typeof serve>; port: number }>(
    (resolve) => {
      const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) =>
        resolve({ server, port: info.port }),
      );
    },
  );
  return {
    port,
    async close() {
      if ('closeAllConnections' in server) server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await close();
    },
  };
}

/** What the bench uses of Bun's global, which Node's types do not know. */
interface BunServe {
  serve(options: {
    fetch: (request: Request, server: unknown) => Response | Promise<Response>;
    port: number;
    hostname: string;
  }): { port: number; stop(closeActiveConnections?: boolean): Promise<void> };
}

/** The same app on Bun: `Bun.serve({ fetch: app.fetch })`, as Hono's guide for Bun writes it. */
export async function serveHonoOnBun(variant: Variant, redisUrl: string): Promise<Running> {
  const bun = (globalThis as { Bun?: BunServe }).Bun;
  if (!bun) throw new Error('serveHonoOnBun runs under Bun');
  const { app, close } = await honoApp(variant, redisUrl);
  const server = bun.serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
  return {
    port: server.port,
    async close() {
      await server.stop(true);
      await close();
    },
  };
}
