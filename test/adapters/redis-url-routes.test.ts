// An adapter given redisUrl opens one Redis connection for itself and every route it limits, and closes it once.
import { createServer, type Server } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as express from '../../packages/express/src/index.ts';
import { express5 } from '../../packages/express/test/apps.ts';
import * as fastify from '../../packages/fastify/src/index.ts';
import { Fastify } from '../../packages/fastify/test/framework.ts';
import * as hono from '../../packages/hono/src/index.ts';
import { createAdaptorServer, Hono } from '../../packages/hono/test/apps.ts';
import * as koa from '../../packages/koa/src/index.ts';
import { Koa } from '../../packages/koa/test/apps.ts';
import { connect, uniquePrefix } from '../harness/clients.ts';
import { type RedisProcess, startRedis } from '../harness/redis-server.ts';
import { waitFor } from '../harness/wait-for.ts';
import { get } from './requests.ts';
import { closeServer } from './server.ts';

/** Routes with limits of their own in each app: each with its own group, so its own limiter. */
const ROUTES = 5;
const GROUPS = Array.from({ length: ROUTES }, (_, i) => `g${i}`);

// A server of this file's own, so that CLIENT LIST counts this file's connections alone.
let server: RedisProcess;
let admin: Redis;

beforeAll(async () => {
  server = await startRedis();
  admin = connect('ioredis 6', server.url);
}, 60_000);
afterAll(async () => {
  admin?.disconnect();
  await server?.stop();
});

/** Connections the server holds besides the admin's own. */
async function others(): Promise<number> {
  const list = (await admin.client('LIST')) as string;
  return list.trim().split('\n').length - 1;
}

/**
 * None besides the admin's, a while after a construction that failed: long enough for a client
 * left open to have connected to a server on this machine.
 */
async function noneLeftOpen(): Promise<void> {
  await sleep(300);
  expect(await others()).toBe(0);
}

const settled = (count: number) =>
  waitFor(async () => (await others()) === count, 5_000, `${count} connections besides admin`);

/** Each route answers once, then 429: a limit of 1 a day per group, counted in Redis. */
async function expectEachRouteLimited(server: Server, paths: readonly string[]): Promise<void> {
  for (const path of paths) {
    expect((await get(server, path)).status, path).toBe(200);
    expect((await get(server, path)).status, path).toBe(429);
  }
}

const options = () => ({
  redisUrl: server.url,
  prefix: uniquePrefix('url-routes'),
  limit: 1,
  window: '1d' as const,
});

describe('route() on a middleware built from redisUrl', () => {
  it.each(['express', 'koa', 'hono'] as const)(
    'shares one connection across %s routes, and close() closes it once',
    async (name) => {
      await settled(0);
      const paths = GROUPS.map((group) => `/${group}`);
      let server: Server;
      let limit: express.RateLimitMiddleware | koa.RateLimitMiddleware | hono.RateLimitMiddleware;
      if (name === 'hono') {
        const middleware = hono.rateLimit(options());
        limit = middleware;
        const app = new Hono();
        for (const group of GROUPS)
          app.get(`/${group}`, middleware.route({ group }), (c) => c.json({}));
        server = createAdaptorServer({ fetch: app.fetch }) as Server;
      } else if (name === 'express') {
        const middleware = express.rateLimit(options());
        limit = middleware;
        const app = express5.app();
        for (const group of GROUPS) {
          app.get(`/${group}`, middleware.route({ group }), (_req, res) => void res.json({}));
        }
        server = createServer(app);
      } else {
        const middleware = koa.rateLimit(options());
        limit = middleware;
        const routes = new Map(GROUPS.map((group) => [`/${group}`, middleware.route({ group })]));
        const app = new Koa();
        app.use(async (ctx, next) => {
          const route = routes.get(ctx.path);
          if (!route) return next();
          return route(ctx, async () => {
            ctx.body = {};
          });
        });
        server = createServer(app.callback());
      }
      try {
        await expectEachRouteLimited(server, paths);
        expect(await others()).toBe(1);
      } finally {
        await closeServer(server);
        await limit.close();
        // Closing twice closes nothing more, and throws nothing.
        await limit.close();
      }
      await settled(0);
    },
  );

  it('closes the client it built when the options prove bad', async () => {
    await settled(0);
    expect(() => express.rateLimit({ ...options(), headers: 'draft-99' as never })).toThrow(
      /`headers`/,
    );
    expect(() => koa.rateLimit({ ...options(), ban: -1 })).toThrow(/`ban`/);
    await noneLeftOpen();
  });

  it('gives a route naming its own redisUrl a client of its own, closed with the middleware', async () => {
    await settled(0);
    const limit = express.rateLimit(options());
    limit.route({ group: 'own', redisUrl: server.url });
    await settled(2);
    await limit.close();
    await settled(0);
  });
});

describe('the Fastify plugin given redisUrl', () => {
  it('shares one connection across config.rateLimit and app.rateLimit() routes, closed with the app', async () => {
    await settled(0);
    const app = Fastify();
    await app.register(fastify.sentinel, options());
    for (const group of GROUPS) {
      app.get(`/${group}`, { config: { rateLimit: { group } } }, async () => ({}));
    }
    app.get(
      '/hooked',
      { config: { rateLimit: false }, onRequest: app.rateLimit({ group: 'hooked' }) },
      async () => ({}),
    );
    app.get('/', async () => ({}));
    await app.ready();
    try {
      await expectEachRouteLimited(app.server, [
        ...GROUPS.map((group) => `/${group}`),
        '/hooked',
        '/',
      ]);
      expect(await others()).toBe(1);
    } finally {
      await app.close();
    }
    await settled(0);
  });

  it('closes the client it built when the options prove bad', async () => {
    await settled(0);
    const app = Fastify();
    await expect(app.register(fastify.sentinel, { ...options(), limit: -1 })).rejects.toThrow(
      /`limit`/,
    );
    await app.close().catch(() => {});
    await noneLeftOpen();
  });
});
