// The Koa middleware over real HTTP, on Koa 3 and 2 with memory and Redis: headers, 429, state, handler, skip, proxy.
import { setTimeout as sleep } from 'node:timers/promises';
import type Koa from 'koa';
import { describe, expect, it } from 'vitest';
import { type Decision, type RateLimitOptions, rateLimit } from '../src/index.ts';
import { KOA_VERSIONS, serve } from './apps.ts';
import { closeLater, STORES, storeOptions } from './stores.ts';

const QUOTA_EXCEEDED = 'https://iana.org/assignments/http-problem-types#quota-exceeded';

/** The decision a route was shown, from its JSON answer. */
async function shown(response: Response): Promise<Decision | null> {
  return ((await response.json()) as { rateLimit: Decision | null }).rateLimit;
}

describe('rateLimit', () => {
  it('throws a TypeError at construction for a handler that is not a function', () => {
    expect(() => rateLimit({ handler: 'teapot' as never })).toThrow(TypeError);
  });

  it("throws core's TypeError at construction for a bad option", () => {
    expect(() => rateLimit({ headers: 'draft-99' as never })).toThrow(/`headers`/);
  });
});

describe.each(KOA_VERSIONS)('on %s', (_, KoaApp) => {
  describe.each(STORES)('with the %s store', (store) => {
    /** An app limited to 2 a minute whose routes answer with the decision they were shown. */
    async function start(options: RateLimitOptions = {}, configure?: (app: Koa) => void) {
      const app = new KoaApp();
      configure?.(app);
      const middleware = closeLater(
        rateLimit({ limit: 2, window: '1m', ...storeOptions(store), ...options }),
      );
      app.use(middleware);
      app.use((ctx) => {
        ctx.body = { ok: true, rateLimit: ctx.state.rateLimit ?? null };
      });
      const { url } = closeLater(await serve(app));
      return { url, middleware };
    }

    it('sends the RateLimit headers on an admitted request, without Retry-After', async () => {
      const { url } = await start();
      const response = await fetch(url);
      expect(response.status).toBe(200);
      expect(response.headers.get('ratelimit-policy')).toBe('"2-per-1m";q=2;w=60');
      expect(response.headers.get('ratelimit')).toMatch(/^"2-per-1m";r=1;t=\d+$/);
      expect(response.headers.get('retry-after')).toBeNull();
    });

    it('answers 429 with a problem+json body, the headers and Retry-After once the limit is spent', async () => {
      const { url } = await start();
      expect((await fetch(url)).status).toBe(200);
      expect((await fetch(url)).status).toBe(200);
      const refused = await fetch(url);
      expect(refused.status).toBe(429);
      expect(refused.headers.get('content-type')).toMatch(/^application\/problem\+json(;|$)/);
      expect(refused.headers.get('ratelimit')).toMatch(/^"2-per-1m";r=0;t=\d+$/);
      const retryAfter = Number(refused.headers.get('retry-after'));
      expect(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60).toBe(true);
      expect(await refused.json()).toEqual({
        type: QUOTA_EXCEEDED,
        title: 'Too Many Requests',
        status: 429,
        detail: expect.stringContaining('2-per-1m'),
        'violated-policies': ['2-per-1m'],
      });
    });

    it('exposes the decision as ctx.state.rateLimit downstream', async () => {
      const { url } = await start();
      const first = await shown(await fetch(url));
      const second = await shown(await fetch(url));
      expect(first).toMatchObject({ allowed: true, limit: 2, remaining: 1, policy: '2-per-1m' });
      expect(second).toMatchObject({ allowed: true, remaining: 0 });
    });

    it('leaves the decision of a refused request in ctx.state.rateLimit for middleware upstream', async () => {
      const seen: Array<Decision | undefined> = [];
      const { url } = await start({}, (app) =>
        app.use(async (ctx, next) => {
          await next();
          seen.push(ctx.state.rateLimit);
        }),
      );
      for (let i = 0; i < 3; i++) await fetch(url);
      expect(seen.map((decision) => decision?.allowed)).toEqual([true, true, false]);
      expect(seen[2]).toMatchObject({ remaining: 0, policy: '2-per-1m' });
    });

    it('never runs downstream middleware for a refused request', async () => {
      let downstream = 0;
      const app = new KoaApp();
      app.use(closeLater(rateLimit({ limit: 2, window: '1m', ...storeOptions(store) })));
      app.use((ctx) => {
        downstream++;
        ctx.body = 'ok';
      });
      const { url } = closeLater(await serve(app));
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push((await fetch(url)).status);
      expect(statuses).toEqual([200, 200, 429, 429]);
      expect(downstream).toBe(2);
    });

    it('lets handler replace the 429, with the headers and Retry-After already set', async () => {
      const calls: Array<{ decision: Decision; retryAfter: string; rateLimit: string }> = [];
      const { url } = await start({
        async handler(ctx, decision) {
          await sleep(5);
          calls.push({
            decision,
            retryAfter: ctx.response.get('Retry-After'),
            rateLimit: ctx.response.get('RateLimit'),
          });
          ctx.status = 418;
          ctx.body = { custom: true, policy: decision.policy };
        },
      });
      await fetch(url);
      await fetch(url);
      expect(calls).toHaveLength(0);
      const refused = await fetch(url);
      expect(refused.status).toBe(418);
      expect(await refused.json()).toEqual({ custom: true, policy: '2-per-1m' });
      expect(refused.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
      expect(calls).toHaveLength(1);
      expect(calls[0]?.decision).toMatchObject({ allowed: false, remaining: 0 });
      expect(calls[0]?.retryAfter).toBe(refused.headers.get('retry-after'));
      expect(calls[0]?.rateLimit).toMatch(/^"2-per-1m";r=0;/);
    });

    it('leaves skipped requests alone: no headers, no decision, no budget spent', async () => {
      const { url } = await start({ skip: (ctx) => ctx.path === '/health' });
      for (let i = 0; i < 4; i++) {
        const response = await fetch(`${url}/health`);
        expect(response.status).toBe(200);
        expect(response.headers.get('ratelimit')).toBeNull();
        expect(await shown(response)).toBeNull();
      }
      expect(await shown(await fetch(url))).toMatchObject({ remaining: 1 });
    });

    it('counts each X-Forwarded-For client on its own when app.proxy is set', async () => {
      const { url } = await start({}, (app) => {
        app.proxy = true;
      });
      const from = (ip: string) => fetch(url, { headers: { 'x-forwarded-for': ip } });
      expect((await from('203.0.113.1')).status).toBe(200);
      expect((await from('203.0.113.1')).status).toBe(200);
      expect((await from('203.0.113.1')).status).toBe(429);
      expect((await from('203.0.113.2')).status).toBe(200);
    });

    it('ignores X-Forwarded-For when app.proxy is not set', async () => {
      const { url } = await start();
      const from = (ip: string) => fetch(url, { headers: { 'x-forwarded-for': ip } });
      expect((await from('203.0.113.1')).status).toBe(200);
      expect((await from('203.0.113.2')).status).toBe(200);
      expect((await from('203.0.113.3')).status).toBe(429);
    });

    it('never answers 5xx to hostile identity headers behind a proxy', async () => {
      const { url } = await start({}, (app) => {
        app.proxy = true;
      });
      const hostile: Array<Record<string, string>> = [
        { 'x-api-key': 'k'.repeat(10_000) },
        { 'x-api-key': '{tenant}:*\t\u00ff' },
        { authorization: 'Bearer ' },
        { 'x-forwarded-for': 'not-an-ip, {}, ::ffff:999.1.1.1' },
        { 'x-forwarded-for': `${'1.'.repeat(3_000)}1` },
      ];
      for (const headers of hostile) {
        expect((await fetch(url, { headers })).status).toBeLessThan(500);
      }
    });

    it('is a named middleware that exposes its limiter', async () => {
      const { url, middleware } = await start();
      expect(middleware.name).toBe('sentinelRateLimit');
      await fetch(url);
      expect(await middleware.limiter.peek('ip:127.0.0.1')).toMatchObject({ remaining: 1 });
    });
  });
});
