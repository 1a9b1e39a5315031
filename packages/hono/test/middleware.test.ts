// The Hono middleware over real HTTP on @hono/node-server, with memory and Redis: the decision in the context, contextKey, getConnInfo, handler, route().
import { describe, expect, it } from 'vitest';
import {
  type Decision,
  type RateLimitOptions,
  type RateLimitVariables,
  rateLimit,
  SentinelError,
} from '../src/index.ts';
import { type Context, getConnInfo, Hono, serve } from './apps.ts';
import { expressIps, sendEach, TRUST_SETTINGS } from './express-ip.ts';
import { closeLater, STORES, storeOptions } from './stores.ts';

type Env = { Variables: RateLimitVariables };

/** The decision a route was shown, from its JSON answer; null where it was shown none. */
async function shown(response: Response): Promise<Decision | null> {
  return ((await response.json()) as { rateLimit: Decision | null }).rateLimit;
}

/** What the routes answer: the decision at `c.get('rateLimit')`, or null. */
const answer = (c: Context<Env>) => c.json({ rateLimit: c.get('rateLimit') ?? null });

/** GETs `url` `times` over, one after another; each body is read, so each request is over. */
async function statuses(url: string, times: number, init?: RequestInit): Promise<number[]> {
  const seen: number[] = [];
  for (let i = 0; i < times; i++) {
    const response = await fetch(url, init);
    await response.arrayBuffer();
    seen.push(response.status);
  }
  return seen;
}

describe('rateLimit', () => {
  it.each([
    ['contextKey', { contextKey: '' }, /`contextKey` must be a non-empty string, got /],
    ['contextKey', { contextKey: 7 }, /`contextKey` must be a non-empty string, got 7/],
    ['getConnInfo', { getConnInfo: 'header' }, /`getConnInfo` must be a function/],
    ['trustProxy', { trustProxy: -1 }, /`trustProxy` must be a number of hops, 0 or more, got -1/],
    ['trustProxy', { trustProxy: 'proxy.internal' }, /`trustProxy` holds 'proxy.internal'/],
    ['handler', { handler: 'teapot' }, /`handler` must be a function/],
  ])('throws a TypeError at construction naming %s, for %o', (_, bad, message) => {
    const build = () => rateLimit({ limit: 2, window: '1m', ...bad } as never);
    expect(build).toThrow(TypeError);
    expect(build).toThrow(message);
  });

  it("throws the same TypeError from route() for the route's own bad options", async () => {
    const limit = closeLater(rateLimit({ limit: 2, window: '1m' }));
    expect(() => limit.route({ contextKey: '' })).toThrow(TypeError);
    expect(() => limit.route({ contextKey: '' })).toThrow(/`contextKey` must be a non-empty/);
    expect(() => limit.route({ trustProxy: -1 })).toThrow(/`trustProxy` must be a number/);
  });

  it('is a named async function that exposes its limiter', async () => {
    const limit = closeLater(rateLimit({ limit: 2, window: '1m' }));
    expect(limit.name).toBe('sentinelRateLimit');
    expect(limit.constructor.name).toBe('AsyncFunction');
    expect(typeof limit.limiter.peek).toBe('function');
  });
});

describe.each(STORES)('with the %s store', (store) => {
  /** Serves `app` and returns its URL; the server and the limiters close after the test. */
  async function start(app: { fetch: Parameters<typeof serve>[0] }): Promise<string> {
    return closeLater(await serve(app.fetch)).url;
  }

  /** A limiter of 2 a minute on this store, closed after the test. */
  const limiter = (options: RateLimitOptions<Env, string> = {}) =>
    closeLater(rateLimit({ limit: 2, window: '1m', ...storeOptions(store), ...options }));

  it("sets the decision at c.get('rateLimit'), with the RateLimit headers, and answers 429 once the limit is spent", async () => {
    const app = new Hono<Env>();
    app.use(limiter());
    app.get('/', answer);
    const url = await start(app);
    const first = await fetch(url);
    expect(first.headers.get('ratelimit-policy')).toBe('"2-per-1m";q=2;w=60');
    expect(first.headers.get('ratelimit')).toMatch(/^"2-per-1m";r=1;t=\d+$/);
    expect(await shown(first)).toMatchObject({ allowed: true, limit: 2, remaining: 1 });
    expect(await shown(await fetch(url))).toMatchObject({ allowed: true, remaining: 0 });
    const refused = await fetch(url);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(refused.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
    expect(await refused.json()).toMatchObject({ status: 429, 'violated-policies': ['2-per-1m'] });
  });

  it('leaves the decision of a refused request in the context for middleware before it', async () => {
    const seen: Array<Decision | undefined> = [];
    const app = new Hono<Env>();
    app.use(async (c, next) => {
      await next();
      seen.push(c.get('rateLimit'));
    });
    app.use(limiter());
    app.get('/', answer);
    expect(await statuses(await start(app), 3)).toEqual([200, 200, 429]);
    expect(seen.map((decision) => decision?.allowed)).toEqual([true, true, false]);
  });

  it('keeps two limiters with their own contextKey apart: each route sees its own decision', async () => {
    const app = new Hono<{
      Variables: RateLimitVariables<'burstLimit'> &
        RateLimitVariables<'dailyLimit'> &
        Env['Variables'];
    }>();
    app.use(limiter({ contextKey: 'burstLimit', group: 'burst' }));
    app.use(limiter({ contextKey: 'dailyLimit', group: 'daily', limit: 5, window: '1d' }));
    app.get('/', (c) =>
      c.json({
        burst: c.get('burstLimit') ?? null,
        daily: c.get('dailyLimit') ?? null,
        rateLimit: c.get('rateLimit') ?? null,
      }),
    );
    const url = await start(app);
    for (const remaining of [1, 0]) {
      const body = (await (await fetch(url)).json()) as Record<string, Decision | null>;
      expect(body.burst).toMatchObject({ policy: '2-per-1m', remaining });
      expect(body.daily).toMatchObject({ policy: '5-per-1d', remaining: remaining + 3 });
      // Neither hid its decision under the default key.
      expect(body.rateLimit).toBeNull();
    }
  });

  it("reads the client's address from the getConnInfo it is given, with the request's context", async () => {
    const asked: string[] = [];
    const app = new Hono<Env>();
    const limit = limiter({
      getConnInfo: (c) => {
        asked.push(c.req.path);
        return { remote: { address: c.req.header('x-peer') } };
      },
    });
    app.use(limit);
    app.get('/', answer);
    const url = await start(app);
    const from = (peer: string) => ({ headers: { 'x-peer': peer } });
    expect(await statuses(url, 3, from('203.0.113.1'))).toEqual([200, 200, 429]);
    // Another address, another budget.
    expect(await statuses(url, 1, from('203.0.113.2'))).toEqual([200]);
    expect(asked).toEqual(['/', '/', '/', '/']);
    expect((await limit.limiter.peek('ip:203.0.113.2')).remaining).toBe(1);
  });

  it("takes @hono/node-server's own getConnInfo as given, and finds the socket's address by default", async () => {
    const given = limiter({ getConnInfo, group: 'given' });
    const byDefault = limiter({ group: 'default' });
    const app = new Hono<Env>();
    app.get('/given', given, answer);
    app.get('/default', byDefault, answer);
    const url = await start(app);
    await statuses(`${url}/given`, 1);
    await statuses(`${url}/default`, 1);
    expect((await given.limiter.peek('ip:127.0.0.1')).remaining).toBe(1);
    expect((await byDefault.limiter.peek('ip:127.0.0.1')).remaining).toBe(1);
  });

  it('believes X-Forwarded-For from the proxies trustProxy names, and no further', async () => {
    const app = new Hono<Env>();
    const limit = limiter({
      getConnInfo: () => ({ remote: { address: '10.0.0.1' } }),
      trustProxy: 'uniquelocal',
    });
    app.use(limit);
    app.get('/', answer);
    const url = await start(app);
    const forwarded = (chain: string) => ({ headers: { 'x-forwarded-for': chain } });
    // The client is the first address from the right that is no private proxy.
    await statuses(url, 1, forwarded('198.51.100.4, 203.0.113.7, 10.0.0.2'));
    await statuses(url, 1, forwarded('203.0.113.7'));
    expect((await limit.limiter.peek('ip:203.0.113.7')).remaining).toBe(0);
    expect((await limit.limiter.peek('ip:198.51.100.4')).remaining).toBe(2);
    expect((await limit.limiter.peek('ip:10.0.0.1')).remaining).toBe(2);
  });

  it('counts requests without any address under one shared identity, and reports that once, naming getConnInfo', async () => {
    const errors: Error[] = [];
    const app = new Hono<Env>();
    app.use(
      limiter({
        getConnInfo: () => ({ remote: {} }),
        // Spoofed headers from each client: without an address, none of them is believed.
        trustProxy: true,
        onError: (error) => errors.push(error),
      }),
    );
    app.get('/', answer);
    const url = await start(app);
    const seen = [];
    for (const client of ['203.0.113.1', '203.0.113.2', '203.0.113.3', '203.0.113.4']) {
      const response = await fetch(url, { headers: { 'x-forwarded-for': client } });
      await response.arrayBuffer();
      seen.push(response.status);
    }
    // Never unlimited: the third request, whoever sends it, is over the shared limit.
    expect(seen).toEqual([200, 200, 429, 429]);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(SentinelError);
    expect(errors[0]).toMatchObject({ code: 'NO_CLIENT_ADDRESS' });
    expect(errors[0]?.message).toContain('`getConnInfo`');
  });

  it('answers a refusal with handler, whose status is set already, and adds the headers and Retry-After', async () => {
    const calls: Array<{ decision: Decision }> = [];
    const app = new Hono<Env>();
    app.use(
      limiter({
        handler: (c, decision) => {
          calls.push({ decision });
          return c.json({ custom: true, policy: decision.policy });
        },
      }),
    );
    app.get('/', answer);
    const url = await start(app);
    expect(await statuses(url, 2)).toEqual([200, 200]);
    expect(calls).toHaveLength(0);
    const refused = await fetch(url);
    expect(refused.status).toBe(429);
    expect(await refused.json()).toEqual({ custom: true, policy: '2-per-1m' });
    expect(refused.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
    expect(refused.headers.get('ratelimit')).toMatch(/^"2-per-1m";r=0;t=\d+$/);
    expect(calls).toHaveLength(1);
    expect(calls[0]?.decision).toMatchObject({ allowed: false, remaining: 0 });
  });

  it('lets handler answer with a status of its own', async () => {
    const app = new Hono<Env>();
    app.use(limiter({ limit: 1, handler: (c) => c.text('slow down', 418) }));
    app.get('/', answer);
    const url = await start(app);
    await statuses(url, 1);
    const refused = await fetch(url);
    expect([refused.status, await refused.text()]).toEqual([418, 'slow down']);
    expect(refused.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
  });
});

describe('trustProxy', () => {
  it.each(TRUST_SETTINGS)(
    'gives the options the client address Express 5 gives as req.ip, set to %o',
    async (trust) => {
      const seen: unknown[] = [];
      const app = new Hono();
      app.use(
        closeLater(
          rateLimit({
            limit: 1000,
            window: '1m',
            trustProxy: trust,
            identify: (req) => {
              seen.push(req.ip);
              return { key: 'everyone' };
            },
          }),
        ),
      );
      app.get('/', (c) => c.json(null));
      await sendEach(closeLater(await serve(app.fetch)).url);
      expect(seen).toEqual(await expressIps(trust));
    },
  );
});

describe('route()', () => {
  /** The app's limit: 3 a minute in memory; closing it closes the routes it made. */
  const appLimit = (options: RateLimitOptions<Env> = {}) =>
    closeLater(rateLimit<'rateLimit', Env>({ limit: 3, window: '1m', ...options }));

  async function start(app: { fetch: Parameters<typeof serve>[0] }): Promise<string> {
    return closeLater(await serve(app.fetch)).url;
  }

  it("limits a route outside the app's middleware by its own options instead", async () => {
    const limit = appLimit();
    const app = new Hono<Env>();
    app.get('/search', limit.route({ limit: 1 }), answer);
    app.use('/api/*', limit);
    app.get('/api/items', answer);
    const url = await start(app);
    const search = await fetch(`${url}/search`);
    expect(search.headers.get('ratelimit-policy')).toBe('"1-per-1m";q=1;w=60');
    expect(await shown(search)).toMatchObject({ remaining: 0 });
    expect(await statuses(`${url}/search`, 1)).toEqual([429]);
    // The app's budget is whole: the route was never counted against it.
    expect(await statuses(`${url}/api/items`, 4)).toEqual([200, 200, 200, 429]);
  });

  it("counts a route behind the app's middleware against both, and shows it its own decision", async () => {
    const limit = appLimit();
    const app = new Hono<Env>();
    app.use(limit);
    app.get('/search', limit.route({ group: 'search', limit: 5 }), answer);
    const url = await start(app);
    const remaining = [];
    for (let i = 0; i < 3; i++)
      remaining.push((await shown(await fetch(`${url}/search`)))?.remaining);
    expect(remaining).toEqual([4, 3, 2]);
    // The app's 3 refuse the fourth.
    expect(await statuses(`${url}/search`, 1)).toEqual([429]);
  });

  it("sets a route of its own contextKey beside the app's decision", async () => {
    const limit = appLimit();
    const app = new Hono<{ Variables: RateLimitVariables & RateLimitVariables<'searchLimit'> }>();
    app.use(limit);
    app.get('/search', limit.route({ group: 'search', limit: 5, contextKey: 'searchLimit' }), (c) =>
      c.json({ app: c.get('rateLimit')?.remaining, search: c.get('searchLimit')?.remaining }),
    );
    const url = await start(app);
    expect(await (await fetch(`${url}/search`)).json()).toEqual({ app: 2, search: 4 });
  });

  it("answers with the route's handler, or else with the app's", async () => {
    const limit = appLimit({ limit: 1, handler: (c) => c.text('app', 429) });
    const app = new Hono<Env>();
    app.get('/own', limit.route({ group: 'own', handler: (c) => c.text('own', 429) }), answer);
    app.get('/inherited', limit.route({ group: 'inherited' }), answer);
    const url = await start(app);
    await statuses(`${url}/own`, 1);
    await statuses(`${url}/inherited`, 1);
    expect(await (await fetch(`${url}/own`)).text()).toBe('own');
    expect(await (await fetch(`${url}/inherited`)).text()).toBe('app');
  });
});
