// The Hono app's rate limits tested with app.request(), in process: docs/testing.md quotes these.
import { randomUUID } from 'node:crypto';
import { MemoryStore, QUOTA_EXCEEDED } from '@sentinel/hono';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { createApp } from './hono-app.ts';

// Every test gets a store of its own, on a clock it moves: budgets start full, and no test waits.
let now: number;
let store: MemoryStore;
beforeEach(() => {
  now = Date.UTC(2026, 0, 1);
  store = new MemoryStore({ clock: () => now });
});
afterEach(() => store.close());

// app.request() has no connection, so no client address: each test names one through
// getConnInfo, which the app is given only in tests (in production, the runtime's connection).
const CLIENT = '203.0.113.7';
const getConnInfo = () => ({ remote: { address: CLIENT } });

describe('a client over its limit', () => {
  it('gets a 429 with Retry-After, the RateLimit headers and a problem body', async () => {
    const { app } = createApp({ store, getConnInfo });
    for (let i = 0; i < 10; i++) expect((await app.request('/hello')).status).toBe(200);
    const refused = await app.request('/hello');
    expect(refused.status).toBe(429);
    expect(refused.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    // FREE refills a request every 6 s, and is full again a minute after the last one.
    expect(refused.headers.get('retry-after')).toBe('6');
    expect(refused.headers.get('ratelimit-policy')).toBe('"free-minute";q=10;w=60');
    expect(refused.headers.get('ratelimit')).toBe('"free-minute";r=0;t=60');
    expect(await refused.json()).toMatchObject({
      type: QUOTA_EXCEEDED,
      status: 429,
      'violated-policies': ['free-minute'],
    });
  });

  it('is refused at once when the test has spent its budget through the limiter', async () => {
    const { app, limit } = createApp({ store, getConnInfo });
    // 1000 a minute: spent in one call rather than in 1000 requests.
    await limit.limiter.penalize('tenant:initech', { tier: 'ENTERPRISE', cost: 1000 });
    const res = await app.request('/hello', { headers: { 'x-api-key': 'enterprise-key' } });
    expect(res.status).toBe(429);
  });
});

describe('a request with no client address', () => {
  it('is counted with every other such request, as one client, and reported', async () => {
    const errors: Error[] = [];
    // No getConnInfo, on purpose: nothing gives these requests an address.
    const { app, limit } = createApp({
      store,
      onError: (error) => {
        errors.push(error);
      },
    });
    for (let i = 0; i < 10; i++) expect((await app.request('/hello')).status).toBe(200);
    expect((await app.request('/hello')).status).toBe(429);
    expect(errors).toEqual([expect.objectContaining({ code: 'NO_CLIENT_ADDRESS' })]);
    // A verified key needs no address; the shared identity is `anonymous`.
    const res = await app.request('/hello', { headers: { 'x-api-key': 'pro-key' } });
    expect(await res.json()).toEqual({ tier: 'PRO', remaining: 19 });
    await limit.limiter.reset('anonymous');
    expect((await app.request('/hello')).status).toBe(200);
  });
});

describe('one app for the whole file', () => {
  // Built once, on the process's memory store: reset what each test spent after it.
  const { app, limit } = createApp({ prefix: `hello-${randomUUID()}`, getConnInfo });
  afterEach(() => limit.limiter.reset(`ip:${CLIENT}`));
  afterAll(() => limit.close());

  it('spends the whole FREE budget', async () => {
    for (let i = 0; i < 10; i++) expect((await app.request('/hello')).status).toBe(200);
    expect((await app.request('/hello')).status).toBe(429);
  });

  it('starts the next test with the budget full', async () => {
    const res = await app.request('/hello');
    expect(await res.json()).toEqual({ tier: 'FREE', remaining: 9 });
  });
});

describe('tiers and API keys', () => {
  it("counts a verified key in its tenant's tier", async () => {
    const { app } = createApp({ store, getConnInfo });
    const res = await app.request('/hello', { headers: { 'x-api-key': 'pro-key' } });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ tier: 'PRO', remaining: 19 });
    expect(res.headers.get('ratelimit-policy')).toBe(
      '"pro-minute";q=100;w=60, "pro-burst";q=20;w=1',
    );
  });

  it('answers a key nobody issued with a 401 problem, before it counts', async () => {
    const { app } = createApp({ store, getConnInfo });
    const res = await app.request('/hello', { headers: { 'x-api-key': 'made-up' } });
    expect(res.status).toBe(401);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(await (await app.request('/hello')).json()).toEqual({ tier: 'FREE', remaining: 9 });
  });
});

describe('time, moved by the test', () => {
  it('refills FREE one request every 6 s', async () => {
    const { app } = createApp({ store, getConnInfo });
    for (let i = 0; i < 10; i++) expect((await app.request('/hello')).status).toBe(200);
    const refused = await app.request('/hello');
    expect([refused.status, refused.headers.get('retry-after')]).toEqual([429, '6']);
    now += 6_000;
    expect((await app.request('/hello')).status).toBe(200);
    expect((await app.request('/hello')).status).toBe(429);
  });

  it('holds a client in its penalty box for an hour after a sixth login attempt', async () => {
    const { app } = createApp({ store, getConnInfo });
    const login = async () => (await app.request('/login', { method: 'POST' })).status;
    for (let i = 0; i < 5; i++) expect(await login()).toBe(401);
    const boxed = await app.request('/login', { method: 'POST' });
    expect([boxed.status, boxed.headers.get('retry-after')]).toEqual([429, '3600']);
    now += 15 * 60_000; // a new 15-minute window, but the box holds
    expect(await login()).toBe(429);
    now += 45 * 60_000;
    expect(await login()).toBe(401);
  });

  it("lets the next export in once a stuck export's 30 s lease has lapsed", async () => {
    let unstick: (rows: unknown[]) => void = () => {};
    const stuck = new Promise<unknown[]>((resolve) => {
      unstick = resolve;
    });
    let runs = 0;
    const exportRows = async () => (++runs === 1 ? stuck : []);
    const { app } = createApp({ store, getConnInfo, exportRows });
    // The first export holds the one slot while it is stuck.
    const first = Promise.resolve(app.request('/export')).then((res) => res.status);
    await vi.waitFor(() => expect(runs).toBe(1));
    expect((await app.request('/export')).status).toBe(429);
    now += 30_000;
    expect((await app.request('/export')).status).toBe(200);
    unstick([]);
    expect(await first).toBe(200);
  });

  it('gives an export its slot back once the test has read its body', async () => {
    const { app } = createApp({ store, getConnInfo });
    const first = await app.request('/export');
    // A response whose body nobody has read is still being sent: it holds the one slot.
    expect((await app.request('/export')).status).toBe(429);
    expect(await first.json()).toEqual({ rows: [] });
    expect((await app.request('/export')).status).toBe(200);
  });
});

describe("a runner's fake Date", () => {
  afterEach(() => vi.useRealTimers());

  it('moves the default memory store too, when only Date is faked', async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: Date.UTC(2026, 0, 1) });
    // No store: the process's memory store, on Date.now().
    const { app, limit } = createApp({ prefix: `fake-date-${randomUUID()}`, getConnInfo });
    for (let i = 0; i < 10; i++) expect((await app.request('/hello')).status).toBe(200);
    expect((await app.request('/hello')).status).toBe(429);
    vi.setSystemTime(Date.UTC(2026, 0, 1, 0, 0, 6));
    expect((await app.request('/hello')).status).toBe(200);
    await limit.close();
  });
});

describe('on a real Redis, as in CI', () => {
  // CI starts Redis and sets REDIS_URL; a prefix of this run's own keeps runs and tests apart.
  const redisUrl = process.env.REDIS_URL;
  const prefix = `test-${randomUUID()}`;
  beforeAll(() => {
    if (redisUrl === undefined) throw new Error('These tests need a Redis: set REDIS_URL');
  });

  it('shares one budget between two instances of the app, and resets it', async () => {
    // A Redis client for each instance, as each process has its own; close() leaves them open.
    const clients = [new Redis(redisUrl as string), new Redis(redisUrl as string)] as const;
    const one = createApp({ redis: clients[0], prefix, getConnInfo });
    const two = createApp({ redis: clients[1], prefix, getConnInfo });
    try {
      // Ten requests, taking turns between the two instances.
      for (let i = 0; i < 5; i++) {
        expect((await one.app.request('/hello')).status).toBe(200);
        expect((await two.app.request('/hello')).status).toBe(200);
      }
      expect((await one.app.request('/hello')).status).toBe(429);
      expect((await two.app.request('/hello')).status).toBe(429);
      await one.limit.limiter.reset(`ip:${CLIENT}`);
      expect((await two.app.request('/hello')).status).toBe(200);
    } finally {
      await Promise.all([one.limit.close(), two.limit.close()]);
      await Promise.all(clients.map((client) => client.quit()));
    }
  });
});
