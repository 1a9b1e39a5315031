// app.sentinel: the plugin's own limiters, read and reset in the very budgets its routes count against.
import { type Limiter, MemoryStore } from '@sentinel/core';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { uniquePrefix } from '../../../test/harness/clients.ts';
import { type SentinelLimiters, sentinel } from '../src/index.ts';
import { answer, app, statuses } from './apps.ts';

const clock = () => Date.UTC(2026, 0, 1);
/** 3 a minute on a prefix of the test's own; a still clock, so nothing refills meanwhile. */
const three = () => ({
  store: new MemoryStore({ clock }),
  prefix: uniquePrefix('fastify-limiters'),
  limit: 3,
  window: '1m' as const,
});
/** inject() comes from 127.0.0.1, counted by the default identify, byIp(). */
const CLIENT = 'ip:127.0.0.1';

describe('app.sentinel', () => {
  it('is typed on every FastifyInstance', () => {
    expectTypeOf<ReturnType<typeof app>['sentinel']>().toEqualTypeOf<SentinelLimiters>();
    expectTypeOf<SentinelLimiters['limiter']>().toEqualTypeOf<Limiter>();
    expectTypeOf<SentinelLimiters['groups']>().toEqualTypeOf<ReadonlyMap<string, Limiter>>();
  });

  it('.limiter peeks at and resets the budget the app-wide routes count against', async () => {
    const server = app();
    await server.register(sentinel, three());
    server.get('/', answer);
    expect(await statuses(server, '/', 4)).toEqual([200, 200, 200, 429]);
    const { limiter } = server.sentinel;
    expect((await limiter.peek(CLIENT)).remaining).toBe(0);
    await limiter.reset(CLIENT);
    expect((await limiter.peek(CLIENT)).remaining).toBe(3);
    expect(await statuses(server, '/', 1)).toEqual([200]);
  });

  it('.groups holds the limiter of each group routes named, apart from the app-wide one', async () => {
    const server = app();
    await server.register(sentinel, three());
    server.get('/', answer);
    server.get('/search', { config: { rateLimit: { group: 'search', cost: 2 } } }, answer);
    server.get(
      '/export',
      { config: { rateLimit: false }, onRequest: server.rateLimit({ group: 'export' }) },
      answer,
    );
    await server.ready();
    expect([...server.sentinel.groups.keys()].sort()).toEqual(['export', 'search']);
    await statuses(server, '/search', 1);
    await statuses(server, '/export', 1);
    const search = server.sentinel.groups.get('search') as Limiter;
    const exported = server.sentinel.groups.get('export') as Limiter;
    expect((await search.peek(CLIENT)).remaining).toBe(1);
    expect((await exported.peek(CLIENT)).remaining).toBe(2);
    expect((await server.sentinel.limiter.peek(CLIENT)).remaining).toBe(3);
    await search.reset(CLIENT);
    expect(await statuses(server, '/search', 1)).toEqual([200]);
  });

  it('builds the limiter on first read with global: false, and names what it lacks', async () => {
    const server = app();
    await server.register(sentinel, { ...three(), global: false });
    server.get('/open', answer);
    expect(await statuses(server, '/open', 4)).toEqual([200, 200, 200, 200]);
    expect((await server.sentinel.limiter.peek(CLIENT)).remaining).toBe(3);

    const bare = app();
    await bare.register(sentinel, { global: false });
    expect(() => bare.sentinel.limiter).toThrow(/`policies` is required/);
  });
});
