// The adapters offer one API: the same names from core, the same errors for bad options, and the
// same value for "no decision".
import { createServer, type Server } from 'node:http';
import type { Decision } from '@sentinel/core';
import { describe, expect, expectTypeOf, it } from 'vitest';
import * as fromCore from '../../packages/core/src/adapter.ts';
import * as express from '../../packages/express/src/index.ts';
import { express5 } from '../../packages/express/test/apps.ts';
import * as fastify from '../../packages/fastify/src/index.ts';
import { Fastify } from '../../packages/fastify/test/framework.ts';
import * as fetchWrapper from '../../packages/fetch/src/index.ts';
import * as hono from '../../packages/hono/src/index.ts';
import { createAdaptorServer, Hono } from '../../packages/hono/test/apps.ts';
import * as koa from '../../packages/koa/src/index.ts';
import { Koa } from '../../packages/koa/test/apps.ts';
import * as nestjs from '../../packages/nestjs/src/index.ts';
import { CONSTRUCT } from './construct.ts';
import { nestApp } from './nestjs.ts';
import { get } from './requests.ts';
import { closeServer } from './server.ts';

/** Each adapter's own exports; everything else it exports comes from core. */
const ADAPTERS = [
  { name: 'express', module: express, own: ['rateLimit'] },
  { name: 'koa', module: koa, own: ['rateLimit'] },
  { name: 'fastify', module: fastify, own: ['sentinel', 'default', 'SENTINEL_HOOKS'] },
  { name: 'hono', module: hono, own: ['rateLimit'] },
  { name: 'fetch', module: fetchWrapper, own: ['withRateLimit', 'decisionOf'] },
  {
    name: 'nestjs',
    module: nestjs,
    own: [
      'SentinelModule',
      'SentinelGuard',
      'SentinelService',
      'SlotInterceptor',
      'RateLimit',
      'SkipRateLimit',
      'RateLimitDecision',
      'RateLimitException',
      'SentinelThrottlerStorage',
      'SENTINEL_OPTIONS',
      'RATE_LIMIT_METADATA',
      'SKIP_RATE_LIMIT_METADATA',
    ],
  },
] as const;

describe('the adapters', () => {
  it.each(ADAPTERS)('re-export exactly the names of core/adapter from $name', ({ module, own }) => {
    const reExported = Object.keys(module).filter(
      (name) => !(own as readonly string[]).includes(name),
    );
    expect(reExported.sort()).toEqual(Object.keys(fromCore).sort());
    // The very objects core exports, not copies: instanceof SentinelError holds across packages.
    for (const [name, value] of Object.entries(fromCore)) {
      expect(module[name as keyof typeof module], name).toBe(value);
    }
  });

  it('export the same types from core, the store options and error types included', () => {
    // Checked by the compiler: a type missing from one adapter fails the typecheck.
    expectTypeOf<koa.Limiter>().toEqualTypeOf<express.Limiter>();
    expectTypeOf<fastify.Limiter>().toEqualTypeOf<express.Limiter>();
    expectTypeOf<koa.MemoryStoreOptions>().toEqualTypeOf<fastify.MemoryStoreOptions>();
    expectTypeOf<koa.RedisStoreOptions>().toEqualTypeOf<fastify.RedisStoreOptions>();
    expectTypeOf<koa.SentinelErrorCode>().toEqualTypeOf<fastify.SentinelErrorCode>();
    expectTypeOf<koa.StoreErrorMode>().toEqualTypeOf<fastify.StoreErrorMode>();
    expectTypeOf<koa.StoreErrorMode>().toEqualTypeOf<express.StoreErrorMode>();
    expectTypeOf<hono.Limiter>().toEqualTypeOf<express.Limiter>();
    expectTypeOf<fetchWrapper.Limiter>().toEqualTypeOf<express.Limiter>();
    expectTypeOf<hono.RedisStoreOptions>().toEqualTypeOf<fastify.RedisStoreOptions>();
    expectTypeOf<fetchWrapper.RedisStoreOptions>().toEqualTypeOf<fastify.RedisStoreOptions>();
    expectTypeOf<hono.SentinelErrorCode>().toEqualTypeOf<koa.SentinelErrorCode>();
    expectTypeOf<fetchWrapper.SentinelErrorCode>().toEqualTypeOf<koa.SentinelErrorCode>();
    // The two fetch API adapters also share the request their options' functions read, and
    // the trust-proxy setting that stands in for their frameworks' missing one.
    expectTypeOf<hono.FetchRequestLike>().toEqualTypeOf<fetchWrapper.FetchRequestLike>();
    expectTypeOf<hono.TrustProxy>().toEqualTypeOf<fetchWrapper.TrustProxy>();
  });

  it('export the same names from core, including the store options and error types', () => {
    const names = ADAPTERS.map(({ module, own }) =>
      Object.keys(module)
        .filter((name) => !(own as readonly string[]).includes(name))
        .sort(),
    );
    expect(names).toHaveLength(ADAPTERS.length);
    for (const [i, each] of names.entries()) expect(each, ADAPTERS[i]?.name).toEqual(names[0]);
    expect(names[0]).toEqual(
      expect.arrayContaining(['MemoryStore', 'RedisStore', 'SentinelError']),
    );
  });
});

async function failure(build: (options: unknown) => Promise<void>, options: unknown) {
  try {
    await build(options);
  } catch (error) {
    expect(error).toBeInstanceOf(TypeError);
    return (error as Error).message;
  }
  return undefined;
}

const BAD_OPTIONS: ReadonlyArray<[string, unknown, RegExp]> = [
  ['no options', undefined, /`policies` is required/],
  ['empty options', {}, /`policies` is required/],
  ['options that are not an object', 'limit=10', /`options` must be an object/],
  ['a list instead of options', [{ limit: 1, window: '1m' }], /`options` must be an object/],
  ['a misspelt option', { limit: 1, window: '1m', onLimted: () => {} }, /`onLimted`/],
  [
    'a handler that is not a function',
    { limit: 1, window: '1m', handler: 'teapot' },
    /`handler` must be a function/,
  ],
  ['a bad core option', { limit: 1, window: '1m', headers: 'draft-99' }, /`headers`/],
];

describe('bad options', () => {
  it.each(BAD_OPTIONS)(
    'throw the same TypeError from every adapter for %s',
    async (_, options, message) => {
      // Nest answers refusals with exception filters: it has no `handler`, and says so (below).
      const builds = Object.entries(CONSTRUCT)
        .filter(([name]) => !(name === 'nestjs' && 'handler' in Object(options)))
        .map(([, build]) => build);
      const messages = await Promise.all(builds.map((build) => failure(build, options)));
      expect(messages[0]).toMatch(message);
      expect(messages).toEqual(messages.map(() => messages[0]));
      expect(messages).toHaveLength(builds.length);
    },
  );

  it('throw a TypeError from nestjs for `handler`, pointing at an exception filter', async () => {
    const message = await failure(CONSTRUCT.nestjs, { limit: 1, window: '1m', handler: () => {} });
    expect(message).toBe(
      '@sentinel/core: `handler` is not an option of @sentinel/nestjs: a refusal is thrown as a RateLimitException, which an exception filter, @Catch(RateLimitException), answers your way',
    );
  });

  it.each([
    ['express', express.rateLimit],
    ['koa', koa.rateLimit],
    ['hono', hono.rateLimit],
  ] as const)(
    "throw a TypeError from %s's route() for options that are not an object",
    async (_, rateLimit) => {
      const limit = rateLimit({ limit: 1, window: '1m' });
      expect(() => limit.route('cost=5' as never)).toThrow(/`route options` must be an object/);
      await limit.close();
    },
  );

  it("have no route() on fetch: a path's own limits are a wrapper of their own, which checks them as the app's", async () => {
    const handler = fetchWrapper.withRateLimit(() => new Response('ok'), {
      limit: 1,
      window: '1m',
    });
    try {
      // The wrapper is a handler, not a router: there is nothing to layer a route's options over.
      expect('route' in handler).toBe(false);
      expect(Object.keys(handler).sort()).toEqual(['close', 'limiter']);
      // What stands in for route('cost=5') is a second wrapper, and it refuses the same way.
      expect(() => fetchWrapper.withRateLimit(() => new Response('ok'), 'cost=5' as never)).toThrow(
        /`options` must be an object/,
      );
    } finally {
      await handler.close();
    }
  });
});

/** What a route saw as the decision: its type, so that undefined and null stay apart. */
interface Seen {
  type: string;
  isNull: boolean;
}
const seen = (value: Decision | null | undefined): Seen => ({
  type: typeof value,
  isNull: value === null,
});

/**
 * An app of each adapter: `/` limited with `options`, `/open` with no limit at all; its server
 * not yet listening, for supertest.
 */
const APPS = {
  async express(options: express.RateLimitOptions) {
    const app = express5.app();
    const limit = express.rateLimit(options);
    app.get('/open', (req, res) => void res.json(seen(req.rateLimit)));
    app.use(limit);
    app.get('/', (req, res) => void res.json(seen(req.rateLimit)));
    const server = createServer(app);
    return { server, close: () => closeServer(server).then(() => limit.close()) };
  },
  async koa(options: koa.RateLimitOptions) {
    const app = new Koa();
    const limit = koa.rateLimit(options);
    const answer = async (ctx: Koa.Context) => {
      ctx.body = seen(ctx.state.rateLimit);
    };
    app.use(async function route(ctx) {
      if (ctx.path === '/open') return answer(ctx);
      return limit(ctx, () => answer(ctx));
    });
    const server = createServer(app.callback());
    return { server, close: () => closeServer(server).then(() => limit.close()) };
  },
  async fastify(options: fastify.SentinelOptions) {
    const app = Fastify();
    await app.register(fastify.sentinel, options);
    app.get('/', async (request) => seen(request.rateLimit));
    app.get('/open', { config: { rateLimit: false } }, async (request) => seen(request.rateLimit));
    await app.ready();
    return { server: app.server, close: () => app.close() };
  },
  async hono(options: hono.RateLimitOptions) {
    const app = new Hono<{ Variables: hono.RateLimitVariables }>();
    const limit = hono.rateLimit(options);
    app.get('/open', (c) => c.json(seen(c.get('rateLimit'))));
    app.get('/', limit, (c) => c.json(seen(c.get('rateLimit'))));
    const server = createAdaptorServer({ fetch: app.fetch }) as Server;
    return { server, close: () => closeServer(server).then(() => limit.close()) };
  },
  async fetch(options: fetchWrapper.WithRateLimitOptions) {
    // Its second argument, @hono/node-server's bindings, is where the wrapper finds the address.
    const answer = (request: Request, ..._bindings: unknown[]) =>
      Response.json(seen(fetchWrapper.decisionOf(request)));
    const limited = fetchWrapper.withRateLimit(answer, options);
    // The wrapper has no router: /open is a handler no wrapper covers.
    const server = createAdaptorServer({
      fetch: (request, env) =>
        new URL(request.url).pathname === '/open' ? answer(request) : limited(request, env),
    }) as Server;
    return { server, close: () => closeServer(server).then(() => limited.close()) };
  },
  nestjs: (options: nestjs.SentinelModuleOptions) =>
    nestApp(options, [{ path: '/open', rateLimit: false }], (req) => seen(req.rateLimit)),
};

async function seenAt(server: Server, path: string): Promise<Seen> {
  const reply = await get(server, path);
  expect(reply.status).toBe(200);
  return reply.body as Seen;
}

describe('"no decision"', () => {
  it.each(Object.keys(APPS) as (keyof typeof APPS)[])(
    'is undefined on %s, for a skipped request and for a route no limit covers',
    async (name) => {
      const limited = await APPS[name]({ limit: 5, window: '1m' });
      const skipped = await APPS[name]({ limit: 5, window: '1m', skip: () => true });
      try {
        // The positive control: a decision, where one is made, is what the route sees.
        expect(await seenAt(limited.server, '/')).toEqual({ type: 'object', isNull: false });
        const undecided = { type: 'undefined', isNull: false };
        expect(await seenAt(skipped.server, '/')).toEqual(undecided);
        expect(await seenAt(limited.server, '/open')).toEqual(undecided);
      } finally {
        await limited.close();
        await skipped.close();
      }
    },
  );
});
