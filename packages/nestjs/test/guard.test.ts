// SentinelGuard in real Nest apps on Express and Fastify: decorators, skipping, route-only limiting, guard order, forRootAsync, slots and start-up errors.
import type { INestApplication } from '@nestjs/common';
import request from 'supertest';
import { afterEach, describe, expect, it } from 'vitest';
import { connect, uniquePrefix } from '../../../test/harness/clients.ts';
import { nestApp } from '../../../test/harness/nest-apps.ts';
import { byApiKey, RateLimit, type SentinelModuleOptions } from '../src/index.ts';

type Apps = typeof import('./apps/http-app.ts');
const { AsyncAppModule, BadRouteModule, createApp, createHttpApp, gates } = (await import(
  nestApp('http-app')
)) as Apps;

const PLATFORMS = ['express', 'fastify'] as const;
const open: INestApplication[] = [];
let redis: ReturnType<typeof connect> | undefined;

afterEach(async () => {
  await Promise.all(open.splice(0).map((app) => app.close()));
});

/** Store options: the memory store, or the harness's Redis under a prefix of this test's own. */
function storeOf(name: 'memory' | 'redis'): Partial<SentinelModuleOptions> {
  if (name === 'memory') return {};
  redis ??= connect();
  return { redis, prefix: uniquePrefix('nestjs'), timeout: 1_000 };
}

async function start(options: Parameters<Apps['createHttpApp']>[0]) {
  const app = await createHttpApp(options);
  open.push(app);
  return request(app.getHttpServer());
}

async function statuses(send: () => PromiseLike<{ status: number }>, count: number) {
  const seen: number[] = [];
  for (let i = 0; i < count; i++) seen.push((await send()).status);
  return seen;
}

describe.each(PLATFORMS)('on %s', (platform) => {
  describe.each(['memory', 'redis'] as const)('with the %s store', (storeName) => {
    it('limits every route with the module options, with draft-11 headers and a problem body', async () => {
      const app = await start({
        platform,
        options: { ...storeOf(storeName), limit: 2, window: '1m' },
      });
      const first = await app.get('/');
      expect(first.status).toBe(200);
      expect(first.headers['ratelimit-policy']).toBe('"2-per-1m";q=2;w=60');
      expect(first.headers.ratelimit).toMatch(/^"2-per-1m";r=1;t=\d+$/);
      expect(first.body.rateLimit).toMatchObject({ allowed: true, remaining: 1 });
      await app.get('/');
      const refused = await app.get('/');
      expect(refused.status).toBe(429);
      expect(refused.headers['content-type']).toMatch(/^application\/problem\+json\b/);
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
      expect(JSON.parse(refused.text)).toMatchObject({
        type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
        status: 429,
        'violated-policies': ['2-per-1m'],
      });
    });

    it("layers a handler's @RateLimit over the module's: its own limit, group and cost", async () => {
      const app = await start({
        platform,
        options: { ...storeOf(storeName), limit: 10, window: '1m' },
      });
      expect(await statuses(() => app.get('/search'), 4)).toEqual([200, 200, 200, 429]);
      // The module's budget is another: /search took nothing from it.
      expect((await app.get('/')).body.rateLimit.remaining).toBe(9);
      // cost 2 over the module's 10 per minute, counted in the module's budget.
      expect((await app.get('/heavy')).body.rateLimit.remaining).toBe(7);
      expect((await app.get('/limiters')).body).toEqual({ groups: ['search'], hasLimiter: true });
      // @RateLimitDecision() hands a handler the decision req.rateLimit holds.
      expect((await app.get('/decision')).body).toEqual({ remaining: 6 });
    });
  });

  it('skips @SkipRateLimit() handlers and classes, and limits @SkipRateLimit(false) inside them', async () => {
    const app = await start({ platform, options: { limit: 1, window: '1m' } });
    await app.get('/');
    const health = await statuses(() => app.get('/health'), 3);
    expect(health).toEqual([200, 200, 200]);
    const free = await app.get('/internal/free');
    expect(free.status).toBe(200);
    expect(free.body.rateLimit).toBeNull();
    expect(free.headers['ratelimit-policy']).toBeUndefined();
    // The class is skipped, this handler is not: the module's budget, spent by GET /.
    expect((await app.get('/internal/counted')).status).toBe(429);
  });

  it('limits only the handlers that bind the guard when no global guard is set', async () => {
    const app = await start({ platform, options: { limit: 1, window: '1m' }, global: false });
    expect(await statuses(() => app.get('/quotes/open'), 3)).toEqual([200, 200, 200]);
    expect((await app.get('/quotes/open')).headers['ratelimit-policy']).toBeUndefined();
    expect(await statuses(() => app.get('/quotes/limited'), 2)).toEqual([200, 429]);
  });

  it('counts per user when the guard runs after the auth guard that finds the user', async () => {
    const app = await start({ platform, options: { limit: 100, window: '1m' } });
    const as = (user: string) => () => app.get('/account').set('authorization', `User ${user}`);
    // No user: the auth guard refuses before Sentinel sees the request.
    expect((await app.get('/account')).status).toBe(401);
    expect(await statuses(as('ada'), 3)).toEqual([200, 200, 429]);
    expect(await statuses(as('bob'), 2)).toEqual([200, 200]);
    expect((await as('bob')()).headers['ratelimit-policy']).toBe('"2-per-1m";q=2;w=60');
  });

  it('counts failed logins per IP, since the global guard runs before the login route’s auth guard', async () => {
    const app = await start({ platform, options: { limit: 100, window: '1m' } });
    const attempt = (password: string) => () =>
      app.post('/login').set('x-forwarded-for', '203.0.113.9').set('x-password', password);
    expect(await statuses(attempt('wrong'), 3)).toEqual([401, 401, 401]);
    // The right password comes too late: the three attempts spent the IP's budget.
    expect((await attempt('right')()).status).toBe(429);
    expect((await attempt('right')().set('x-forwarded-for', '203.0.113.10')).status).toBe(201);
  });

  it("picks each API key's tier: FREE is 10 requests a minute", async () => {
    const tiers = { FREE: { limit: 10, window: '1m' }, PRO: { limit: 100, window: '1m' } } as const;
    const keys: Record<string, string> = { 'sk-free': 'FREE', 'sk-pro': 'PRO' };
    const identify = byApiKey({
      lookup: async (key) => (keys[key] ? { tenant: key.slice(3), tier: keys[key] } : null),
      unknownKey: 'reject',
    });
    const app = await start({ platform, options: { tiers, defaultTier: 'FREE', identify } });
    const free = await statuses(() => app.get('/').set('x-api-key', 'sk-free'), 11);
    expect(free).toEqual([...Array(10).fill(200), 429]);
    const pro = await app.get('/').set('x-api-key', 'sk-pro');
    expect(pro.headers['ratelimit-policy']).toMatch(/q=100;w=60/);
    expect((await app.get('/').set('x-api-key', 'sk-nobody')).status).toBe(401);
  });

  it('releases a concurrency slot when the handler throws and when the client leaves', async () => {
    const app = await createHttpApp({
      platform,
      options: { concurrency: 1 },
    });
    open.push(app);
    const client = request(app.getHttpServer());
    // Each request errors, and gives its slot back: none is refused.
    expect(await statuses(() => client.get('/boom'), 3)).toEqual([500, 500, 500]);
    const url = await listen(app);
    const leaving = new AbortController();
    const held = fetch(`${url}/held/a`, { signal: leaving.signal }).catch(() => undefined);
    await until(() => gates.has('a'));
    expect((await fetch(`${url}/`)).status).toBe(429);
    leaving.abort();
    await held;
    // The slot comes back once Nest's response closes, while the handler still waits.
    await until(async () => (await fetch(`${url}/`)).status === 200);
    gates.get('a')?.();
  });
});

async function listen(app: INestApplication): Promise<string> {
  await app.listen(0, '127.0.0.1');
  return (await app.getUrl()).replace('[::1]', '127.0.0.1');
}

/** Polls `condition` every 10 ms, for at most 5 s. */
async function until(condition: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('the condition never held');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('setup', () => {
  it.each(PLATFORMS)(
    'takes its options from forRootAsync’s factory and what it injects, on %s',
    async (platform) => {
      const app = await createApp(platform, AsyncAppModule);
      open.push(app);
      const client = request(app.getHttpServer());
      const replies = await statuses(() => client.get('/async'), 5);
      expect(replies).toEqual([200, 200, 200, 200, 429]);
    },
  );

  it('fails app.init() with a TypeError naming a bad @RateLimit() value', async () => {
    await expect(createApp('express', BadRouteModule)).rejects.toThrow(TypeError);
    await expect(createApp('express', BadRouteModule)).rejects.toThrow(/`limit`/);
  });

  it('names a misspelt @RateLimit() option as the decorator is applied', () => {
    expect(() => RateLimit({ limt: 5 } as never)).toThrow(
      '@sentinel/core: `limt` is not an option: did you mean `limit`?',
    );
  });
});
