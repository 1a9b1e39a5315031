// The Koa app under load: a tiny JSON answer behind the variant's limiter, if any.
import type { Server } from 'node:http';
import { rateLimit as sentinel } from '@sentinel/koa';
import Koa, { type Middleware } from 'koa';
import koaRatelimit from 'koa-ratelimit';
import { connect, createFloor } from './redis-clients.ts';
import { headersByHand, sentinelMiddleware } from './sentinel-options.ts';
import { HUGE_LIMIT, type Running, type Variant, WINDOW_MS } from './variants.ts';

async function limiterOf(
  variant: Variant,
  redisUrl: string,
): Promise<{ use?: Middleware; close(): Promise<unknown> }> {
  switch (variant) {
    case 'bare':
      return { close: async () => {} };
    case 'floor': {
      const floor = await createFloor(redisUrl);
      const use: Middleware = async (ctx, next) => {
        await floor.call(ctx.req);
        await next();
      };
      return { use, close: floor.close };
    }
    case 'sentinel':
    case 'sentinel-by-key':
    case 'sentinel-own-client':
    case 'sentinel-leases': {
      return sentinelMiddleware(variant, redisUrl, sentinel);
    }
    case 'bare-headers': {
      const headers = headersByHand();
      const use: Middleware = async (ctx, next) => {
        for (const [name, value] of headers()) ctx.set(name, value);
        await next();
      };
      return { use, close: async () => {} };
    }
    case 'koa-ratelimit': {
      const db = await connect(redisUrl);
      return {
        use: koaRatelimit({
          driver: 'redis',
          // Its types name ioredis 5's client; it only calls defineCommand, which 6 keeps.
          db: db as never,
          duration: WINDOW_MS,
          max: HUGE_LIMIT,
        }),
        close: () => db.quit(),
      };
    }
    default:
      throw new TypeError(`Koa has no variant ${variant}`);
  }
}

export async function serveKoa(variant: Variant, redisUrl: string): Promise<Running> {
  const limiter = await limiterOf(variant, redisUrl);
  const app = new Koa();
  if (limiter.use) app.use(limiter.use);
  app.use((ctx) => {
    ctx.body = { ok: true };
  });
  const server = await new Promise<Server>((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  const address = server.address();
  if (typeof address !== 'object' || !address) throw new Error('Koa is not listening');
  return {
    port: address.port,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await limiter.close();
    },
  };
}
