// GraphQL through SentinelGuard on Express and Fastify: one count per operation, and a refusal as a GraphQL error with the problem and the RateLimit headers.
import { once } from 'node:events';
import type { INestApplication } from '@nestjs/common';
import {
  byApiKey,
  byHeader,
  byIp,
  chain,
  MemoryStore,
  QUOTA_EXCEEDED,
  type SentinelModuleOptions,
} from '@sentinel/nestjs';
import request from 'supertest';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { connect, uniquePrefix } from '../../../test/harness/clients.ts';
import { nestApp } from '../../../test/harness/nest-apps.ts';
import { waitFor } from '../../../test/harness/wait-for.ts';

const { createGraphQLApp, gates } = (await import(
  nestApp('graphql-app')
)) as typeof import('./apps/graphql-app.ts');

type Platform = 'express' | 'fastify';
type ContextShape = 'default' | 'request-response';

/**
 * Each platform with Nest's own GraphQL context, `{ req }`, and with one an app writes to reach
 * the response. Fastify's request does not hold its reply: with the default context an admitted
 * operation gets no RateLimit headers, and a refused one gets them from Apollo Server.
 */
const SETUPS: Array<{ platform: Platform; context: ContextShape; admittedHeaders: boolean }> = [
  { platform: 'express', context: 'default', admittedHeaders: true },
  { platform: 'express', context: 'request-response', admittedHeaders: true },
  { platform: 'fastify', context: 'default', admittedHeaders: false },
  { platform: 'fastify', context: 'request-response', admittedHeaders: true },
];

// A deadline for a machine other suites load, as the other Nest suites give: the default 50 ms
// would let a slow reply pass by the failure mode, which `failures` catches.
const redisStore = () => ({
  redis: connect(),
  prefix: uniquePrefix('nest-graphql'),
  timeout: 1_000,
});

/** What the limiters report failing: a test must not pass by the failure mode. */
const failures: string[] = [];
const onError = (error: Error) => failures.push(error.message);

const apps: INestApplication[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
  expect(failures.splice(0)).toEqual([]);
});

const TENANTS: Record<string, string> = { 'key-alpha': 'alpha', 'key-beta': 'beta' };
const byTenantKey = () =>
  chain(byApiKey({ lookup: (key) => (TENANTS[key] ? { tenant: TENANTS[key] } : null) }), byIp());

/** A graphql-transport-ws connection: `run` sends an operation and gets every result it streams. */
async function graphqlWs(url: string, headers: Record<string, string>) {
  const socket = new WebSocket(url, 'graphql-transport-ws', { headers });
  await once(socket, 'open');
  socket.send(JSON.stringify({ type: 'connection_init' }));
  await once(socket, 'message'); // connection_ack
  const operations = new Map<string, (message: { type: string; payload?: unknown }) => void>();
  socket.on('message', (data: Buffer) => {
    const message = JSON.parse(String(data));
    operations.get(message.id)?.(message);
  });
  let ids = 0;
  return {
    run(query: string): Promise<unknown[]> {
      const id = String(++ids);
      const results: unknown[] = [];
      return new Promise((resolve) => {
        operations.set(id, ({ type, payload }) => {
          if (type === 'next') results.push(payload);
          if (type === 'error') resolve([{ errors: payload }]);
          if (type === 'complete') resolve(results);
        });
        socket.send(JSON.stringify({ id, type: 'subscribe', payload: { query } }));
      });
    },
    close: () => socket.close(),
  };
}

interface GraphQLError {
  message: string;
  path?: string[];
  extensions: Record<string, unknown>;
}

describe.each(SETUPS)('GraphQL on $platform, $context context', (setup) => {
  async function start(options: SentinelModuleOptions) {
    const app = await createGraphQLApp({ ...setup, options: { onError, ...options } });
    apps.push(app);
    const server = app.getHttpServer();
    return (query: string, headers: Record<string, string> = {}) =>
      request(server).post('/graphql').set(headers).send({ query });
  }

  it('counts a query of three top-level fields once per HTTP request', async () => {
    const post = await start({ ...redisStore(), limit: 10, window: '1m' });
    for (const remaining of [9, 8, 7]) {
      const res = await post('{ remaining hello itemCount }');
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ data: { remaining, hello: 'hello', itemCount: 0 } });
      if (setup.admittedHeaders) expect(res.headers.ratelimit).toMatch(`;r=${remaining};`);
      else expect(res.headers.ratelimit).toBeUndefined();
    }
  });

  it('counts mutations once per request, and never runs a refused one', async () => {
    const post = await start({ store: new MemoryStore(), limit: 3, window: '1m' });
    const twice = 'mutation { a: addItem(name: "x") b: addItem(name: "y") }';
    expect((await post(twice)).body).toEqual({ data: { a: 1, b: 2 } });
    expect((await post('{ remaining }')).body).toEqual({ data: { remaining: 1 } });
    expect((await post(twice)).body).toEqual({ data: { a: 3, b: 4 } });
    const refused = await post(twice);
    expect(refused.body.data).toBeNull();
    expect(refused.body.errors[0].extensions.status).toBe(429);
    // Another client sees the items: the refused mutation added none.
    const other = await post('{ itemCount }', { 'x-forwarded-for': '198.51.100.7' });
    expect(other.body).toEqual({ data: { itemCount: 4 } });
  });

  it('refuses over the limit with a GraphQL error holding the problem, and RateLimit and Retry-After headers', async () => {
    const post = await start({ store: new MemoryStore(), limit: 2, window: '1m' });
    await post('{ hello }');
    await post('{ hello }');
    const res = await post('{ remaining hello itemCount }');
    // Nest's Apollo driver answers 200 whenever the result has `data`, null as it is.
    expect(res.status).toBe(200);
    expect(res.body.data).toBeNull();
    const [error] = res.body.errors as GraphQLError[];
    expect(error?.path).toEqual(['remaining']);
    expect(error?.message).toBe('Too Many Requests');
    // Nest's driver turns every HttpException of a status it has no code for into this shape.
    expect(error?.extensions).toEqual({
      code: 'INTERNAL_SERVER_ERROR',
      status: 429,
      originalError: {
        type: QUOTA_EXCEEDED,
        title: 'Too Many Requests',
        status: 429,
        detail: expect.stringMatching(/^Quota exceeded for 2-per-1m; retry in \d+ s\.$/),
        'violated-policies': ['2-per-1m'],
      },
    });
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.headers.ratelimit).toMatch(/^"2-per-1m";r=0;t=\d+$/);
    expect(res.headers['ratelimit-policy']).toBe('"2-per-1m";q=2;w=60');
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
  });

  it('counts each API key on its own budget, and no raw key reaches Redis', async () => {
    const store = redisStore();
    const post = await start({ ...store, identify: byTenantKey(), limit: 2, window: '1m' });
    const alpha = { 'x-api-key': 'key-alpha' };
    expect((await post('{ remaining }', alpha)).body.data).toEqual({ remaining: 1 });
    expect((await post('{ remaining }', alpha)).body.data).toEqual({ remaining: 0 });
    expect((await post('{ remaining }', alpha)).body.errors[0].extensions.status).toBe(429);
    const beta = await post('{ remaining }', { authorization: 'Bearer key-beta' });
    expect(beta.body.data).toEqual({ remaining: 1 });
    // No key: counted by the client address, apart from both tenants.
    expect((await post('{ remaining }')).body.data).toEqual({ remaining: 1 });
    const keys = await store.redis.keys(`${store.prefix}:*`);
    expect(keys.some((key) => key.includes('tenant:alpha'))).toBe(true);
    expect(keys.filter((key) => key.includes('key-alpha') || key.includes('key-beta'))).toEqual([]);
  });

  it('skips a field marked @SkipRateLimit(), and counts the rest of its query once', async () => {
    const post = await start({ store: new MemoryStore(), limit: 2, window: '1m' });
    for (let i = 0; i < 4; i++)
      expect((await post('{ health }')).body.data).toEqual({ health: 'ok' });
    expect((await post('{ health remaining }')).body.data).toEqual({ health: 'ok', remaining: 1 });
  });

  it('limits a field by its own @RateLimit() group, apart from the module budget', async () => {
    const post = await start({ store: new MemoryStore(), limit: 10, window: '1m' });
    expect((await post('{ search }')).body.data).toEqual({ search: 1 });
    expect((await post('{ search }')).body.data).toEqual({ search: 0 });
    const refused = await post('{ search }');
    expect(refused.body.errors[0].extensions.originalError['violated-policies']).toEqual([
      '2-per-1m',
    ]);
    expect((await post('{ remaining }')).body.data).toEqual({ remaining: 9 });
  });

  it('never answers a hostile header with a 5xx', async () => {
    const post = await start({
      ...redisStore(),
      identify: chain(
        byApiKey({ unknownKey: 'count-unverified' }),
        byHeader('x-tenant-id', { unknownValue: 'count-unverified' }),
        byIp(),
      ),
      limit: 1000,
      window: '1m',
    });
    const long = 'x'.repeat(10_000);
    const hostile: Array<Record<string, string>> = [
      { 'x-api-key': long },
      { authorization: `Bearer ${long}` },
      { 'x-api-key': '{}' },
      { 'x-tenant-id': '}{' },
      { 'x-tenant-id': '%E6%BC%A2%7B%7D' },
      { 'x-forwarded-for': 'not-an-ip' },
      { 'x-forwarded-for': `${'1.2.3.4, '.repeat(500)}5.6.7.8` },
      { 'x-forwarded-for': '[2001:db8::1]:443' },
    ];
    for (const headers of hostile) {
      const res = await post('{ hello }', headers);
      expect(res.status, JSON.stringify(headers).slice(0, 80)).toBe(200);
      expect(res.body).toEqual({ data: { hello: 'hello' } });
    }
  });

  it('releases a concurrency slot when its operation ends, answered or thrown', async () => {
    const post = await start({ store: new MemoryStore(), concurrency: 1 });
    const admitted = async () => (await post('{ hello }')).body.data?.hello === 'hello';
    for (const outcome of ['answer', 'throw'] as const) {
      const name = `${setup.platform}-${setup.context}-${outcome}`;
      const held = post(`{ held(name: "${name}") }`).then((res) => res.body);
      await waitFor(() => gates.has(name), 5_000, 'the held resolver');
      const refused = await post('{ hello }');
      expect(refused.body.errors[0].extensions.originalError).toMatchObject({
        status: 429,
        reason: 'concurrency',
      });
      gates.get(name)?.(outcome === 'throw');
      gates.delete(name);
      const body = await held;
      if (outcome === 'answer') expect(body).toEqual({ data: { held: name } });
      else expect(body.errors[0].message).toBe('the resolver failed');
      await waitFor(admitted, 5_000, 'a free slot');
    }
  });
});

describe.each(['express', 'fastify'] as const)('GraphQL over graphql-ws on %s', (platform) => {
  async function start(options: SentinelModuleOptions): Promise<string> {
    const app = await createGraphQLApp({
      platform,
      options: { onError, ...options },
      subscriptions: true,
    });
    apps.push(app);
    await app.listen(0, '127.0.0.1');
    return (await app.getUrl()).replace(/^http/, 'ws');
  }

  it('counts each operation once by its connection, and a subscription once when it starts', async () => {
    const store = redisStore();
    const url = await start({ ...store, identify: byTenantKey(), limit: 3, window: '1m' });
    const alpha = await graphqlWs(`${url}/graphql`, { 'x-api-key': 'key-alpha' });
    const beta = await graphqlWs(`${url}/graphql`, { 'x-api-key': 'key-beta' });
    try {
      // Three operations of alpha's are admitted: counted per field or per event, they would not be.
      expect(await alpha.run('{ hello itemCount }')).toEqual([
        { data: { hello: 'hello', itemCount: 0 } },
      ]);
      expect(await alpha.run('subscription { ticks(to: 3) }')).toEqual([
        { data: { ticks: 1 } },
        { data: { ticks: 2 } },
        { data: { ticks: 3 } },
      ]);
      expect(await alpha.run('{ hello }')).toEqual([{ data: { hello: 'hello' } }]);
      const [refused] = (await alpha.run('{ hello }')) as Array<{ errors: GraphQLError[] }>;
      expect(refused?.errors[0]?.extensions).toEqual({
        code: 'INTERNAL_SERVER_ERROR',
        status: 429,
        originalError: expect.objectContaining({ type: QUOTA_EXCEEDED, status: 429 }),
      });
      // Counted by the key in the upgrade request's headers: beta's budget is its own.
      expect(await beta.run('{ hello }')).toEqual([{ data: { hello: 'hello' } }]);
      expect(await store.redis.keys(`${store.prefix}:*tenant:beta*`)).not.toEqual([]);
      // The refused connection stays open, and its next operation is answered.
      expect(await alpha.run('{ health }')).toEqual([{ data: { health: 'ok' } }]);
    } finally {
      alpha.close();
      beta.close();
    }
  });
});
