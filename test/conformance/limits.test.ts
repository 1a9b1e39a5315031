// Limits over HTTP: the limit then 429, the decision routes see, per-route limits, cost, groups.
import { expect, it } from 'vitest';
import {
  COST_EXCEEDS_LIMIT,
  type HttpLimiterOptions,
  QUOTA_EXCEEDED,
  type RequestLike,
} from '../../packages/core/src/index.ts';
import { manualClock } from '../../packages/core/test/stores.ts';
import { uniquePrefix } from '../harness/clients.ts';
import {
  conformance,
  exposed,
  getMany,
  rateLimitHeaderNames,
  startApp,
  useStore,
} from './adapters.ts';

conformance((driver, storeName) => {
  it('admits exactly the limit, then answers 429 with a problem body', async () => {
    const { options } = useStore(storeName);
    const app = await startApp(driver, { options: { ...options, limit: 3, window: '1m' } });
    const replies = await getMany(app, 5);
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 429, 429]);
    const refused = replies[3];
    expect(refused?.headers.get('content-type')).toMatch(/^application\/problem\+json\b/);
    expect(refused?.body).toEqual({
      type: QUOTA_EXCEEDED,
      title: 'Too Many Requests',
      status: 429,
      detail: expect.stringContaining('3-per-1m'),
      'violated-policies': ['3-per-1m'],
    });
    expect(refused?.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
  });

  it('exposes to the route the decision its headers describe', async () => {
    const clock = manualClock();
    const { options } = useStore(storeName, { clock: clock.now });
    const app = await startApp(driver, {
      options: { ...options, limit: 5, window: '1m' },
    });
    for (const remaining of [4, 3]) {
      const reply = await app.get();
      expect(reply.status).toBe(200);
      const decision = exposed(reply);
      expect(decision).toMatchObject({
        allowed: true,
        limit: 5,
        remaining,
        resetMs: (5 - remaining) * 12_000,
        retryAfterMs: 0,
        policy: '5-per-1m',
        policies: [{ policy: '5-per-1m', allowed: true, limit: 5, windowMs: 60_000, remaining }],
      });
      const t = Math.ceil((decision?.resetMs ?? Number.NaN) / 1000);
      expect(reply.headers.get('ratelimit')).toBe(`"${decision?.policy}";r=${remaining};t=${t}`);
    }
  });

  it('leaves a route with rateLimit false unlimited and undecided', async () => {
    const { options } = useStore(storeName);
    const app = await startApp(driver, {
      options: { ...options, limit: 1, window: '1m' },
      routes: [{ path: '/health', rateLimit: false }],
    });
    expect((await getMany(app, 2)).map((r) => r.status)).toEqual([200, 429]);
    for (const reply of await getMany(app, 3, '/health')) {
      expect(reply.status).toBe(200);
      expect(exposed(reply)).toBeNull();
      expect(rateLimitHeaderNames(reply.headers)).toEqual([]);
    }
  });

  it("limits a route with its own options instead of the app's, counting it once", async () => {
    const { options } = useStore(storeName);
    const app = await startApp(driver, {
      options: { ...options, limit: 3, window: '1m' },
      routes: [{ path: '/strict', rateLimit: { limit: 1 } }, { path: '/plain' }],
    });
    const strict = await getMany(app, 2, '/strict');
    expect(strict.map((r) => r.status)).toEqual([200, 429]);
    expect(strict[0]?.headers.get('ratelimit-policy')).toBe('"1-per-1m";q=1;w=60');
    // The app's budget is untouched by /strict, and shared by every route without its own.
    const statuses: number[] = [];
    for (const path of ['/', '/plain', '/', '/plain']) statuses.push((await app.get(path)).status);
    expect(statuses).toEqual([200, 200, 200, 429]);
    expect((await app.get('/')).headers.get('ratelimit-policy')).toBe('"3-per-1m";q=3;w=60');
  });

  it('draws a fixed cost from the budget and refuses what no longer fits', async () => {
    const clock = manualClock();
    const { options } = useStore(storeName, { clock: clock.now });
    const app = await startApp(driver, {
      options: { ...options, limit: 10, window: '1m' },
      routes: [{ path: '/export', rateLimit: { cost: 4 } }],
    });
    const exports = await getMany(app, 3, '/export');
    expect(exports.map((r) => r.status)).toEqual([200, 200, 429]);
    expect(exports.slice(0, 2).map((r) => exposed(r)?.remaining)).toEqual([6, 2]);
    // Two tokens are left and four are needed: two refill in 2 × 6 s.
    expect(exports[2]?.headers.get('retry-after')).toBe('12');
    // The refused export took nothing: the cheap route still has the two tokens.
    const cheap = await getMany(app, 3);
    expect(cheap.map((r) => r.status)).toEqual([200, 200, 429]);
    expect(cheap.slice(0, 2).map((r) => exposed(r)?.remaining)).toEqual([1, 0]);
  });

  it('draws the cost a function computes from the request', async () => {
    const clock = manualClock();
    const { options } = useStore(storeName, { clock: clock.now });
    const cost = (req: RequestLike) => Number(req.headers['x-cost'] ?? 1);
    const app = await startApp(driver, {
      options: { ...options, limit: 10, window: '1m', cost },
    });
    const five = await app.get('/', { 'x-cost': '5' });
    const three = await app.get('/', { 'x-cost': '3' });
    const tooMuch = await app.get('/', { 'x-cost': '3' });
    const one = await app.get('/');
    expect([five, three, tooMuch, one].map((r) => r.status)).toEqual([200, 200, 429, 200]);
    expect([five, three, one].map((r) => exposed(r)?.remaining)).toEqual([5, 2, 1]);
  });

  it('refuses a cost over a limit for good: 403, no Retry-After, a problem naming both numbers', async () => {
    const { options } = useStore(storeName, { clock: manualClock().now });
    const limited: number[] = [];
    const app = await startApp(driver, {
      options: {
        ...options,
        policies: [
          { name: 'free-minute', limit: 10, window: '1m' },
          { name: 'free-burst', limit: 3, window: '1s' },
        ],
        onLimited: (_req, decision) => limited.push(decision.retryAfterMs),
      },
      routes: [{ path: '/export', rateLimit: { cost: 5 } }],
    });
    const refused = await getMany(app, 2, '/export');
    expect(refused.map((r) => r.status)).toEqual([403, 403]);
    const [first] = refused;
    expect(first?.headers.get('retry-after')).toBeNull();
    expect(first?.headers.get('content-type')).toMatch(/^application\/problem\+json\b/);
    expect(first?.body).toEqual({
      type: COST_EXCEEDS_LIMIT,
      title: 'Cost Exceeds Limit',
      status: 403,
      detail: expect.stringMatching(/costs 5, more than the limit of 3 per 1s of free-burst/),
      'violated-policies': ['free-burst'],
      policy: 'free-burst',
      limit: 3,
      cost: 5,
    });
    // The state is real, so it is told; nothing was taken from either policy.
    expect(first?.headers.get('ratelimit')).toBe('"free-burst";r=3;t=0');
    expect(limited).toEqual([Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY]);
    const cheap = await app.get('/');
    expect(cheap.status).toBe(200);
    expect(exposed(cheap)?.policies.map((p) => p.remaining)).toEqual([9, 2]);
  });

  it('refuses an option it does not know at start-up, naming it and the likely one', async () => {
    const { options } = useStore(storeName);
    const typo = { ...options, limit: 3, window: '1m', onLimted: () => {} } as HttpLimiterOptions;
    await expect(startApp(driver, { options: typo })).rejects.toThrow(
      /`onLimted` is not an option: did you mean `onLimited`\?/,
    );
  });

  it('makes the routes of one group share a single budget, apart from other routes', async () => {
    const { options } = useStore(storeName);
    const search = { group: 'search', limit: 3, window: '1m' } as const;
    const app = await startApp(driver, {
      options: { ...options, limit: 100, window: '1m' },
      routes: [
        { path: '/search/a', rateLimit: search },
        { path: '/search/b', rateLimit: search },
        { path: '/browse', rateLimit: { limit: 3, window: '1m' } },
      ],
    });
    const sequence = ['/search/a', '/search/b', '/search/a', '/search/b', '/search/a'];
    const statuses: number[] = [];
    for (const path of sequence) statuses.push((await app.get(path)).status);
    expect(statuses).toEqual([200, 200, 200, 429, 429]);
    const browse = await app.get('/browse');
    expect(browse.status).toBe(200);
    expect(exposed(browse)?.remaining).toBe(2);
    const root = await app.get('/');
    expect(root.status).toBe(200);
    expect(exposed(root)?.remaining).toBe(99);
  });
});

// Without a store option, the per-route limiters an adapter builds must still meet in one memory
// store: otherwise two grouped routes each get the full limit (@fastify/rate-limit issue 463).
conformance(
  (driver) => {
    it('makes grouped routes share a budget with the default memory store too', async () => {
      const search = { group: 'search', limit: 2, window: '1m' } as const;
      const app = await startApp(driver, {
        options: { prefix: uniquePrefix('conformance'), limit: 100, window: '1m' },
        routes: [
          { path: '/search/a', rateLimit: search },
          { path: '/search/b', rateLimit: search },
        ],
      });
      const statuses: number[] = [];
      for (const path of ['/search/a', '/search/b', '/search/a', '/search/b']) {
        statuses.push((await app.get(path)).status);
      }
      expect(statuses).toEqual([200, 200, 429, 429]);
    });
  },
  ['memory'],
);
