// Every adapter takes a policy's fields at the top level, and names a misspelt option of its own.
import { createServer, type Server } from 'node:http';
import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../../packages/core/src/index.ts';
import { manualClock } from '../../packages/core/test/stores.ts';
import * as express from '../../packages/express/src/index.ts';
import { express5 } from '../../packages/express/test/apps.ts';
import * as fastify from '../../packages/fastify/src/index.ts';
import { Fastify } from '../../packages/fastify/test/framework.ts';
import * as fetchWrapper from '../../packages/fetch/src/index.ts';
import * as hono from '../../packages/hono/src/index.ts';
import { createAdaptorServer, Hono } from '../../packages/hono/test/apps.ts';
import * as koa from '../../packages/koa/src/index.ts';
import { Koa } from '../../packages/koa/test/apps.ts';
import type * as nestjs from '../../packages/nestjs/src/index.ts';
import { CONSTRUCT } from './construct.ts';
import { nestApp } from './nestjs.ts';
import { get } from './requests.ts';
import { closeServer } from './server.ts';

/**
 * An app of each adapter limiting GET / with `options`; each request answers 200 when admitted.
 * Its server is not yet listening, for supertest.
 */
const APPS = {
  async express(options: express.RateLimitOptions) {
    const app = express5.app();
    const limit = express.rateLimit(options);
    app.use(limit);
    app.get('/', (_req, res) => void res.json({ ok: true }));
    const server = createServer(app);
    return { server, close: () => closeServer(server).then(() => limit.close()) };
  },
  async koa(options: koa.RateLimitOptions) {
    const app = new Koa();
    const limit = koa.rateLimit(options);
    app.use(limit);
    app.use(async (ctx) => {
      ctx.body = { ok: true };
    });
    const server = createServer(app.callback());
    return { server, close: () => closeServer(server).then(() => limit.close()) };
  },
  async fastify(options: fastify.SentinelOptions) {
    const app = Fastify();
    await app.register(fastify.sentinel, options);
    app.get('/', async () => ({ ok: true }));
    await app.ready();
    return { server: app.server, close: () => app.close() };
  },
  async hono(options: hono.RateLimitOptions) {
    const app = new Hono();
    const limit = hono.rateLimit(options);
    app.use(limit);
    app.get('/', (c) => c.json({ ok: true }));
    const server = createAdaptorServer({ fetch: app.fetch }) as Server;
    return { server, close: () => closeServer(server).then(() => limit.close()) };
  },
  async fetch(options: fetchWrapper.WithRateLimitOptions) {
    const handler = fetchWrapper.withRateLimit(() => Response.json({ ok: true }), options);
    const server = createAdaptorServer({ fetch: handler }) as Server;
    return { server, close: () => closeServer(server).then(() => handler.close()) };
  },
  nestjs: (options: nestjs.SentinelModuleOptions) => nestApp(options, [], () => ({ ok: true })),
};
const NAMES = Object.keys(APPS) as (keyof typeof APPS)[];

/** An app's middleware whose route() takes a route's options over the app's, unchecked. */
interface Routed {
  route(options: object): unknown;
  close(): Promise<void>;
}

/** The adapters with a route(), each building its app's middleware from `options`. */
const ROUTE: Record<'express' | 'koa' | 'hono', (options: object) => Routed> = {
  express: (options) => express.rateLimit(options) as Routed,
  koa: (options) => koa.rateLimit(options) as Routed,
  hono: (options) => hono.rateLimit(options) as unknown as Routed,
};
const ROUTED = Object.keys(ROUTE) as (keyof typeof ROUTE)[];

/**
 * The fetch wrapper has no route(): a path with limits of its own is a wrapper of its own, given
 * the app's options with the path's over them, as a user writes it. Closed if it was built.
 */
function ownPath(own: object): void {
  const handler = fetchWrapper.withRateLimit(() => new Response('ok'), {
    limit: 1,
    window: '1m',
    ...own,
  });
  void handler.close();
}

async function failure(name: keyof typeof CONSTRUCT, options: unknown): Promise<string> {
  try {
    await CONSTRUCT[name](options);
  } catch (error) {
    expect(error).toBeInstanceOf(TypeError);
    return (error as Error).message;
  }
  throw new Error(`${name} accepted the options`);
}

describe("a policy's fields at the top level", () => {
  it.each(NAMES)('name the policy and box the client on %s, as in `policies`', async (name) => {
    // A clock of the test's own: both requests in one window, however slow the machine.
    const clock = manualClock();
    const app = await APPS[name]({
      name: 'login',
      limit: 1,
      window: '1s',
      blockFor: '10m',
      algorithm: 'fixed-window',
      store: new MemoryStore({ clock: clock.now }),
    });
    try {
      expect((await get(app.server)).status).toBe(200);
      const refused = await get(app.server);
      expect(refused.status).toBe(429);
      expect(refused.headers.get('ratelimit-policy')).toMatch(/^"login";/);
      // Past the window, the penalty box still refuses, for most of its ten minutes.
      clock.advance(1100);
      const boxed = await get(app.server);
      expect(boxed.status).toBe(429);
      expect(Number(boxed.headers.get('retry-after'))).toBeGreaterThan(590);
    } finally {
      await app.close();
    }
  });

  it.each(NAMES)('cannot be combined with `policies` on %s', async (name) => {
    const options = { policies: { limit: 1, window: '1s' }, blockFor: '1m' };
    expect(await failure(name, options)).toContain('`blockFor` cannot be combined with `policies`');
  });
});

describe('a Redis deadline without Redis', () => {
  it.each(NAMES)('is refused on %s, by name', async (name) => {
    expect(await failure(name, { limit: 1, window: '1m', connectTimeout: 500 })).toContain(
      '`connectTimeout` applies to a Redis store only',
    );
  });

  it.each(ROUTED)("is refused in %s's route() options over an app in memory", async (name) => {
    const limit = ROUTE[name]({ limit: 1, window: '1m' });
    try {
      expect(() => limit.route({ timeout: 20 })).toThrow('`timeout` applies to a Redis store only');
    } finally {
      await limit.close();
    }
  });

  it("is refused on fetch, which has no route(), in a path's own wrapper over an app in memory", () => {
    expect(() => ownPath({ timeout: 20 })).toThrow('`timeout` applies to a Redis store only');
  });
});

describe('a clock given to the adapter', () => {
  // A gateway's clock must never stand in for Redis's: only a memory store takes one.
  it.each(NAMES)('is refused on %s, saying where a test clock goes', async (name) => {
    expect(await failure(name, { limit: 1, window: '1m', clock: Date.now })).toBe(
      "@sentinel/core: `clock` belongs to the memory store, for tests: `store: new MemoryStore({ clock })`. A Redis store decides on Redis's clock alone",
    );
  });
});

describe('a misspelt option of the adapter itself', () => {
  it.each(NAMES)('is named on %s, with the option it was likely meant to be', async (name) => {
    expect(await failure(name, { limit: 1, window: '1m', handlr: () => {} })).toBe(
      '@sentinel/core: `handlr` is not an option: did you mean `handler`?',
    );
  });

  // Each adapter's own options beside core's: a misspelling of any of them gets its name.
  it.each([
    ['fastify', 'hoook', 'hook'],
    ['fastify', 'globl', 'global'],
    ['hono', 'getConnInf', 'getConnInfo'],
    ['hono', 'trustProxi', 'trustProxy'],
    ['hono', 'contextKy', 'contextKey'],
    ['fetch', 'clientIP', 'clientIp'],
    ['fetch', 'trustProxi', 'trustProxy'],
  ] as const)('is named on %s: `%s` for `%s`', async (name, typo, known) => {
    expect(await failure(name, { limit: 1, window: '1m', [typo]: true })).toBe(
      `@sentinel/core: \`${typo}\` is not an option: did you mean \`${known}\`?`,
    );
  });

  it.each(ROUTED)(
    "is named in %s's route() options too, where `handler` is a route's own",
    async (name) => {
      const limit = ROUTE[name]({ limit: 1, window: '1m' });
      try {
        expect(() => limit.route({ handlr: () => {} })).toThrow(
          '@sentinel/core: `handlr` is not an option: did you mean `handler`?',
        );
      } finally {
        await limit.close();
      }
    },
  );

  it("is named on fetch, which has no route(), in a path's own wrapper, where `handler` is the path's own", () => {
    expect(() => ownPath({ handlr: () => {} })).toThrow(
      '@sentinel/core: `handlr` is not an option: did you mean `handler`?',
    );
  });
});

describe("@nestjs/throttler's option names", () => {
  const ADAPTERS = Object.keys(CONSTRUCT) as (keyof typeof CONSTRUCT)[];
  // Each name as ThrottlerModule.forRoot() or @Throttle() takes it, and what the answer points to.
  const THROTTLER = [
    ['ttl', 60_000, "use `window`, in milliseconds or a string such as '15m'"],
    ['throttlers', [{ ttl: 60_000, limit: 10 }], 'use `policies`'],
    ['getTracker', () => 'tracker', 'use `identify`'],
    ['generateKey', () => 'key', 'use `identify` for whom a request counts, and `group`'],
    ['skipIf', () => false, 'use `skip`'],
    ['ignoreUserAgents', [/bot/], "use `skip`, testing the request's `user-agent` header"],
    ['setHeaders', false, 'use `headers: false`'],
    ['storage', {}, 'use `store`, `redis` or `redisUrl`'],
    ['ipv6SubnetPrefix', 64, 'use `identify: byIp({ ipv6Subnet })`'],
    ['blockDuration', 60_000, "use a policy's `blockFor`"],
  ] as const;
  const cases = ADAPTERS.flatMap((adapter) =>
    THROTTLER.map(([name, value, use]) => [adapter, name, value, use] as const),
  );

  it.each(cases)(
    'are answered on %s: `%s` with Sentinel’s name',
    async (adapter, name, value, use) => {
      const message = await failure(adapter, { limit: 1, window: '1m', [name]: value });
      expect(message).toContain(`\`${name}\` is `);
      expect(message).toContain(use);
    },
  );

  it.each(ADAPTERS)(
    'name @nestjs/throttler on %s, and what its whole forRoot() options are here',
    async (adapter) => {
      const message = await failure(adapter, {
        throttlers: [{ name: 'short', ttl: 1000, limit: 3 }],
        getTracker: () => 'tracker',
      });
      expect(message).toContain("`throttlers` is @nestjs/throttler's name: use `policies`");
      expect(message).toContain("`getTracker` is @nestjs/throttler's name: use `identify`");
      expect(message).not.toContain('required');
    },
  );
});
