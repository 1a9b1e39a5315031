// The plugin through app.inject: headers, the 429 problem, route config, decorators, handler and hook.
import { MemoryStore, QUOTA_EXCEEDED } from '@sentinel/core';
import { describe, expect, it } from 'vitest';
import { uniquePrefix } from '../../../test/harness/clients.ts';
import { byApiKey, sentinel } from '../src/index.ts';
import { answer, app, statuses } from './apps.ts';

const clock = () => Date.UTC(2026, 0, 1);
/**
 * 2 a minute on a store and prefix of the test's own. A still clock makes every header exact:
 * nothing refills between two requests.
 */
const fresh = () => ({ store: new MemoryStore({ clock }), prefix: uniquePrefix('fastify') });
const two = () => ({ ...fresh(), limit: 2, window: '1m' as const });

describe('a limited route', () => {
  it('sends draft-11 headers on success and exposes the decision as request.rateLimit', async () => {
    const server = app();
    await server.register(sentinel, two());
    server.get('/', answer);
    const res = await server.inject('/');
    expect(res.statusCode).toBe(200);
    expect(res.headers['ratelimit-policy']).toBe('"2-per-1m";q=2;w=60');
    expect(res.headers.ratelimit).toBe('"2-per-1m";r=1;t=30');
    expect(res.json().rateLimit).toMatchObject({ allowed: true, limit: 2, remaining: 1 });
  });

  it('answers 429 with Retry-After and a problem+json body once the limit is spent', async () => {
    const server = app();
    await server.register(sentinel, two());
    server.get('/', answer);
    expect(await statuses(server, '/', 2)).toEqual([200, 200]);
    const res = await server.inject('/');
    expect(res.statusCode).toBe(429);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json\b/);
    expect(res.headers['retry-after']).toBe('30');
    expect(res.headers.ratelimit).toBe('"2-per-1m";r=0;t=60');
    expect(res.json()).toEqual({
      type: QUOTA_EXCEEDED,
      title: 'Too Many Requests',
      status: 429,
      detail: 'Quota exceeded for 2-per-1m; retry in 30 s.',
      'violated-policies': ['2-per-1m'],
    });
  });

  it('counts clients apart by the IP Fastify resolved under trustProxy', async () => {
    const server = app();
    await server.register(sentinel, { ...two(), limit: 1 });
    server.get('/', answer);
    const from = (ip: string) => ({ 'x-forwarded-for': ip });
    expect(await statuses(server, '/', 2, from('198.51.100.1'))).toEqual([200, 429]);
    expect(await statuses(server, '/', 1, from('198.51.100.2'))).toEqual([200]);
  });

  it('never answers a hostile API key with a 5xx', async () => {
    const server = app();
    await server.register(sentinel, two());
    server.get('/', answer);
    for (const key of ['x'.repeat(10_000), '{tag}:*', 'ключ-🔑', ' ', 'a\tb']) {
      const res = await server.inject({ url: '/', headers: { 'x-api-key': key } });
      expect(res.statusCode, key).toBeLessThan(500);
    }
  });
});

describe('config.rateLimit on a route', () => {
  it('merges its options over the plugin options, with a limiter of its own', async () => {
    const server = app();
    await server.register(sentinel, two());
    server.get('/strict', { config: { rateLimit: { limit: 1 } } }, answer);
    server.get('/', answer);
    expect(await statuses(server, '/strict', 2)).toEqual([200, 429]);
    // The plugin's own budget is untouched by the strict route.
    expect(await statuses(server, '/', 3)).toEqual([200, 200, 429]);
  });

  it('replaces the plugin tiers when it names policies of its own', async () => {
    const server = app();
    await server.register(sentinel, { ...fresh(), tiers: { FREE: { limit: 2, window: '1m' } } });
    server.get('/one', { config: { rateLimit: { limit: 1, window: '1h' } } }, answer);
    const res = await server.inject('/one');
    expect(res.headers['ratelimit-policy']).toBe('"1-per-1h";q=1;w=3600');
    expect(await statuses(server, '/one', 1)).toEqual([429]);
  });

  it('turns the limit off with false', async () => {
    const server = app();
    await server.register(sentinel, { ...two(), limit: 1 });
    server.get('/free', { config: { rateLimit: false } }, answer);
    expect(await statuses(server, '/free', 3)).toEqual([200, 200, 200]);
    const res = await server.inject('/free');
    expect(res.headers.ratelimit).toBeUndefined();
    expect(res.json().rateLimit).toBeNull();
  });

  it('is the only way a route gets limited when global is false', async () => {
    const server = app();
    await server.register(sentinel, { ...two(), global: false });
    server.get('/open', answer);
    server.get('/limited', { config: { rateLimit: { limit: 1 } } }, answer);
    expect(await statuses(server, '/open', 3)).toEqual([200, 200, 200]);
    expect(await statuses(server, '/limited', 2)).toEqual([200, 429]);
  });

  it('throws a TypeError when the route is added with options core rejects', async () => {
    const server = app();
    await server.register(sentinel, two());
    expect(() => server.get('/bad', { config: { rateLimit: { cost: 0 } } }, answer)).toThrow(
      TypeError,
    );
  });

  // @fastify/rate-limit issue 463: two routes of one group each got a full budget.
  it('shares one budget between two routes of one group (issue 463)', async () => {
    const server = app();
    await server.register(sentinel, two());
    server.get('/search', { config: { rateLimit: { group: 'search', limit: 3 } } }, answer);
    server.get('/suggest', { config: { rateLimit: { group: 'search', limit: 3 } } }, answer);
    server.get('/export', { config: { rateLimit: { group: 'export', limit: 3 } } }, answer);
    expect(await statuses(server, '/search', 2)).toEqual([200, 200]);
    expect(await statuses(server, '/suggest', 2)).toEqual([200, 429]);
    expect(await statuses(server, '/search', 1)).toEqual([429]);
    expect(await statuses(server, '/export', 3)).toEqual([200, 200, 200]);
  });

  it('charges a route cost against the budget it shares with the plugin options', async () => {
    const server = app();
    await server.register(sentinel, { ...two(), limit: 5 });
    server.get('/heavy', { config: { rateLimit: { cost: 4 } } }, answer);
    server.get('/', answer);
    expect(await statuses(server, '/heavy', 1)).toEqual([200]);
    expect(await statuses(server, '/', 2)).toEqual([200, 429]);
  });
});

describe('the decorators', () => {
  it('app.rateLimit() limits a route as its onRequest hook, with options merged over the plugin', async () => {
    const server = app();
    await server.register(sentinel, { ...two(), global: false });
    server.get('/', { onRequest: server.rateLimit({ limit: 1 }) }, answer);
    expect(await statuses(server, '/', 2)).toEqual([200, 429]);
    const res = await server.inject('/');
    expect(res.headers['ratelimit-policy']).toBe('"1-per-1m";q=1;w=60');
  });

  it('app.rateLimit() limits a route as its preHandler hook, after validation', async () => {
    const server = app();
    await server.register(sentinel, { ...two(), global: false });
    server.post(
      '/',
      {
        preHandler: server.rateLimit(),
        schema: { body: { type: 'object', required: ['q'] } },
      },
      answer,
    );
    const invalid = await server.inject({ method: 'POST', url: '/', payload: {} });
    expect(invalid.statusCode).toBe(400);
    const valid = () => server.inject({ method: 'POST', url: '/', payload: { q: 1 } });
    expect((await valid()).json().rateLimit).toMatchObject({ remaining: 1 });
    expect((await valid()).statusCode).toBe(200);
    expect((await valid()).statusCode).toBe(429);
  });

  it('request.rateLimit is null on routes no limit applies to', async () => {
    const server = app();
    await server.register(sentinel, { ...two(), global: false });
    server.get('/', answer);
    expect((await server.inject('/')).json()).toEqual({ ok: true, rateLimit: null });
  });
});

describe('the handler option', () => {
  it('replaces the refusal, with the status and the RateLimit and Retry-After headers already set', async () => {
    const server = app();
    const seen: unknown[] = [];
    await server.register(sentinel, {
      ...two(),
      limit: 1,
      handler: (request, reply, decision) => {
        seen.push(request.url);
        expect(reply.statusCode).toBe(429);
        reply.code(418).send({ custom: true, policy: decision.policy });
      },
    });
    server.get('/', answer);
    expect((await server.inject('/')).statusCode).toBe(200);
    const res = await server.inject('/');
    expect(res.statusCode).toBe(418);
    expect(res.json()).toEqual({ custom: true, policy: '1-per-1m' });
    expect(res.headers['retry-after']).toBe('60');
    expect(res.headers.ratelimit).toBe('"1-per-1m";r=0;t=60');
    expect(seen).toEqual(['/']);
  });

  it('may answer asynchronously, and the route never runs for a refused request', async () => {
    const server = app();
    let handled = 0;
    await server.register(sentinel, {
      ...two(),
      limit: 1,
      handler: async (_request, reply) => {
        await new Promise((resolve) => setTimeout(resolve, 10));
        reply.send({ later: true });
      },
    });
    // A slow onSend hook leaves reply.sent false for a while after send().
    server.addHook('onSend', async (_request, _reply, payload) => {
      await new Promise((resolve) => setTimeout(resolve, 20));
      return payload;
    });
    server.get('/', async (request) => {
      handled++;
      return answer(request);
    });
    expect(await statuses(server, '/', 3)).toEqual([200, 429, 429]);
    expect(handled).toBe(1);
  });

  it('leaves a 401 for a rejected API key to its problem body', async () => {
    const server = app();
    let called = false;
    await server.register(sentinel, {
      ...two(),
      identify: byApiKey({ lookup: () => null, unknownKey: 'reject' }),
      handler: () => {
        called = true;
      },
    });
    server.get('/', answer);
    const res = await server.inject({ url: '/', headers: { 'x-api-key': 'unknown' } });
    expect(res.statusCode).toBe(401);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json\b/);
    expect(res.json()).toMatchObject({ status: 401, title: 'Unauthorized' });
    expect(called).toBe(false);
  });
});

describe('the hook option', () => {
  const post = (server: ReturnType<typeof app>, payload: unknown) =>
    server.inject({ method: 'POST', url: '/', payload: payload as object });

  async function onHook(hook?: 'onRequest' | 'preParsing' | 'preValidation' | 'preHandler') {
    const server = app();
    await server.register(sentinel, { ...two(), limit: 1, ...(hook && { hook }) });
    server.post(
      '/',
      { schema: { body: { type: 'object', required: ['q'] } } },
      async (request) => ({
        body: request.body,
      }),
    );
    return server;
  }

  it('limits in onRequest by default, so requests that fail validation still count', async () => {
    const server = await onHook();
    expect((await post(server, {})).statusCode).toBe(400);
    expect((await post(server, { q: 1 })).statusCode).toBe(429);
  });

  it('limits in preHandler when told, so requests that fail validation cost nothing', async () => {
    const server = await onHook('preHandler');
    expect((await post(server, {})).statusCode).toBe(400);
    expect((await post(server, { q: 1 })).statusCode).toBe(200);
    expect((await post(server, { q: 1 })).statusCode).toBe(429);
  });

  it('leaves the body intact when limiting in preParsing', async () => {
    const server = await onHook('preParsing');
    const res = await post(server, { q: 'kept' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ body: { q: 'kept' } });
    expect(res.headers.ratelimit).toBe('"1-per-1m";r=0;t=60');
  });

  it('rejects an unknown hook at registration', async () => {
    await expect(app().register(sentinel, { ...two(), hook: 'onSend' as never })).rejects.toThrow(
      TypeError,
    );
  });
});
