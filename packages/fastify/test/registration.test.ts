// Which routes the plugin covers: encapsulation, registration order, HEAD routes and app.close().
import type { FastifyInstance } from 'fastify';
import { describe, expect, it } from 'vitest';
import { uniquePrefix } from '../../../test/harness/clients.ts';
import { sentinel } from '../src/index.ts';
import { answer, app, statuses } from './apps.ts';

// Limiters without a store share the process's memory store: each app gets a prefix of its own.
const one = () => ({ limit: 1, window: '1m' as const, prefix: uniquePrefix('fastify') });

describe('the plugin registered at the root', () => {
  it('covers routes added after it, in the root and in child contexts', async () => {
    const server = app();
    await server.register(sentinel, one());
    server.get('/root', { config: { rateLimit: { group: 'root' } } }, answer);
    await server.register(
      async (child) => {
        child.get('/child', answer);
        child.get('/child-off', { config: { rateLimit: false } }, answer);
      },
      { prefix: '/api' },
    );
    expect(await statuses(server, '/root', 2)).toEqual([200, 429]);
    expect(await statuses(server, '/api/child', 2)).toEqual([200, 429]);
    expect(await statuses(server, '/api/child-off', 2)).toEqual([200, 200]);
  });

  it('covers root routes added before it, honouring their config.rateLimit', async () => {
    const server = app();
    server.get('/early', answer);
    server.get('/early-own', { config: { rateLimit: { limit: 2, group: 'own' } } }, answer);
    server.get('/early-off', { config: { rateLimit: false } }, answer);
    await server.register(sentinel, one());
    expect(await statuses(server, '/early', 2)).toEqual([200, 429]);
    expect(await statuses(server, '/early-own', 3)).toEqual([200, 200, 429]);
    expect(await statuses(server, '/early-off', 2)).toEqual([200, 200]);
  });

  it('covers routes added while its registration is still pending (register not awaited)', async () => {
    const server = app();
    server.register(sentinel, one());
    server.get('/', answer);
    server.register(async (child) => {
      child.get('/child', { config: { rateLimit: { limit: 2 } } }, answer);
    });
    expect(await statuses(server, '/', 2)).toEqual([200, 429]);
    expect(await statuses(server, '/child', 3)).toEqual([200, 200, 429]);
  });

  it('covers child contexts created before it, honouring their config.rateLimit', async () => {
    const server = app();
    await server.register(async (child) => {
      child.get('/older-child', answer);
      child.get('/older-own', { config: { rateLimit: { limit: 2, group: 'own' } } }, answer);
      child.get('/older-off', { config: { rateLimit: false } }, answer);
    });
    await server.register(sentinel, one());
    const first = await server.inject('/older-child');
    expect(first.json().rateLimit).toMatchObject({ allowed: true, remaining: 0 });
    expect(await statuses(server, '/older-child', 1)).toEqual([429]);
    expect(await statuses(server, '/older-own', 3)).toEqual([200, 200, 429]);
    expect(await statuses(server, '/older-off', 2)).toEqual([200, 200]);
  });

  // onRoute never sees routes added before the plugin, so their limiter is built when their
  // first request arrives, and options core rejects fail that request instead of startup.
  it("reports bad options of a route added before it at that route's first request", async () => {
    const server = app();
    server.get('/early-bad', { config: { rateLimit: { cost: 0 } } }, answer);
    await server.register(sentinel, one());
    const res = await server.inject('/early-bad');
    expect(res.statusCode).toBe(500);
    expect(res.json().message).toMatch(/`cost` must be a positive integer/);
  });

  it('limits the HEAD route Fastify adds for a GET with the same budget', async () => {
    const server = app();
    await server.register(sentinel, one());
    server.get('/doc', { config: { rateLimit: { limit: 2, group: 'doc' } } }, answer);
    expect((await server.inject({ method: 'HEAD', url: '/doc' })).statusCode).toBe(200);
    expect(await statuses(server, '/doc', 2)).toEqual([200, 429]);
  });
});

describe('the plugin registered in a child context', () => {
  async function scoped(): Promise<FastifyInstance> {
    const server = app();
    server.get('/outside', answer);
    await server.register(async (child) => {
      await child.register(sentinel, one());
      child.get('/inside', answer);
    });
    server.register(async (sibling) => {
      sibling.get('/sibling', answer);
    });
    return server;
  }

  it('limits the routes of that context', async () => {
    const server = await scoped();
    expect(await statuses(server, '/inside', 2)).toEqual([200, 429]);
  });

  it('leaves routes of the parent and of sibling contexts alone', async () => {
    const server = await scoped();
    expect(await statuses(server, '/outside', 3)).toEqual([200, 200, 200]);
    expect(await statuses(server, '/sibling', 3)).toEqual([200, 200, 200]);
    const res = await server.inject('/outside');
    expect(res.headers.ratelimit).toBeUndefined();
    expect(server.hasDecorator('rateLimit')).toBe(false);
  });
});

describe('closing the app', () => {
  it('closes the limiters through onClose, after which no request can be limited', async () => {
    const server = app();
    await server.register(sentinel, one());
    server.get('/', answer);
    await server.inject('/');
    await expect(server.close()).resolves.toBeUndefined();
    await expect(server.inject('/')).rejects.toThrow();
  });
});
