// Failures in a running app (Redis down, unknown tier, a bad identify, cost or skip): fail open or
// answer 503, report each one, and never claim a quota the limiter does not know.
import type { Redis } from 'ioredis';
import { afterEach, expect, it } from 'vitest';
import {
  type HttpLimiterOptions,
  type Identity,
  type RequestLike,
  SentinelError,
} from '../../packages/core/src/index.ts';
import type { AdapterDriver } from '../adapters/driver.ts';
import { connect, uniquePrefix } from '../harness/clients.ts';
import { type RedisProcess, startRedis } from '../harness/redis-server.ts';
import { waitFor } from '../harness/wait-for.ts';
import {
  type App,
  conformance,
  exposed,
  getMany,
  REDIS_TIMEOUT_MS,
  type Reply,
  rateLimitHeaderNames,
  type StoreName,
  startApp,
  useStore,
} from './adapters.ts';

const servers: RedisProcess[] = [];
const clients: Redis[] = [];

afterEach(async () => {
  // Disconnect before the harness quits them: a quit queued on a dead server would never settle.
  for (const client of clients.splice(0)) client.disconnect();
  await Promise.all(servers.splice(0).map((server) => server.stop()));
});

interface Failure {
  probe: string | undefined;
  error: Error;
}

/** An onError that records each error with the request's probe header. */
function recorder(failures: Failure[]): (error: Error, req: RequestLike) => void {
  return (error, req) => {
    const probe = req.headers['x-probe'];
    failures.push({ probe: Array.isArray(probe) ? probe[0] : probe, error });
  };
}

/** A Redis server of the test's own, and a client on it that gives up at once when it is down. */
async function redisToStop(): Promise<{ client: Redis; stop(): Promise<void> }> {
  const server = await startRedis();
  servers.push(server);
  const client = connect('ioredis 6', server.url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
  });
  clients.push(client);
  await waitFor(() => client.status === 'ready');
  return {
    client,
    async stop() {
      await server.stop();
      await waitFor(() => client.status !== 'ready');
    },
  };
}

/**
 * Apps on one Redis server of their own, each proven healthy by one admitted request, whose
 * server is then stopped; every error reaching onError is recorded with the request's probe.
 * The healthy request has the suite's deadline, which a loaded machine does not miss; once the
 * server is stopped, calls fail at once on the lost connection, whatever the deadline.
 */
async function appsWithRedisDown(
  driver: AdapterDriver,
  variants: readonly Partial<HttpLimiterOptions>[],
): Promise<{ apps: App[]; healthy: Reply[]; failures: Failure[] }> {
  const redis = await redisToStop();
  const failures: Failure[] = [];
  const apps: App[] = [];
  const healthy: Reply[] = [];
  for (const options of variants) {
    const app = await startApp(driver, {
      options: {
        redis: redis.client,
        prefix: uniquePrefix('conformance-failure'),
        timeout: REDIS_TIMEOUT_MS,
        limit: 100,
        window: '1m',
        onError: recorder(failures),
        ...options,
      },
    });
    const reply = await app.get('/', { 'x-probe': 'healthy' });
    expect(reply.status, failures.map((f) => f.error.message).join('; ')).toBe(200);
    expect(exposed(reply)?.degraded).toBeUndefined();
    apps.push(app);
    healthy.push(reply);
  }
  await redis.stop();
  return { apps, healthy, failures };
}

async function appWithRedisDown(
  driver: AdapterDriver,
  options: Partial<HttpLimiterOptions> = {},
): Promise<{ app: App; failures: Failure[] }> {
  const { apps, failures } = await appsWithRedisDown(driver, [options]);
  return { app: apps[0] as App, failures };
}

/**
 * For each header format: every RateLimit field a reply sends while the limiter knows the state
 * (`full`), and the ones it keeps when it does not: the policy, never a remaining count or reset.
 */
const FORMATS = [
  {
    headers: 'draft-11',
    full: ['ratelimit', 'ratelimit-policy'],
    policyOnly: { 'ratelimit-policy': '"100-per-1m";q=100;w=60' },
  },
  {
    headers: 'draft-7',
    full: ['ratelimit', 'ratelimit-policy'],
    policyOnly: { 'ratelimit-policy': '100;w=60' },
  },
  {
    headers: 'draft-6',
    full: ['ratelimit-limit', 'ratelimit-policy', 'ratelimit-remaining', 'ratelimit-reset'],
    policyOnly: { 'ratelimit-limit': '100', 'ratelimit-policy': '100;w=60' },
  },
  {
    headers: 'legacy',
    full: ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset'],
    policyOnly: { 'x-ratelimit-limit': '100' },
  },
] as const;

/** Options whose skip, identify or cost is broken, and what the error reported says. */
const MISUSES: Array<[string, Partial<HttpLimiterOptions>, string]> = [
  ['a cost that returns -1', { cost: () => -1 }, '`cost` must be a positive integer, got -1'],
  ['a cost that throws', { cost: () => Promise.reject(new Error('pricing down')) }, 'pricing down'],
  [
    'an identify with no key',
    { identify: () => ({ tier: 'FREE' }) as unknown as Identity },
    '`identify` returned a key',
  ],
  [
    'a skip that throws',
    {
      skip: () => {
        throw new Error('flags down');
      },
    },
    'flags down',
  ],
];

/** The RateLimit fields of a reply, by name. */
function rateLimitFields(reply: Reply | undefined): Record<string, string | null> {
  const headers = reply?.headers ?? new Headers();
  return Object.fromEntries(rateLimitHeaderNames(headers).map((name) => [name, headers.get(name)]));
}

conformance(
  (driver) => {
    it('fails open by default: admits, and reports the error with its request', async () => {
      const { app, failures } = await appWithRedisDown(driver);
      const down = await app.get('/', { 'x-probe': 'down' });
      expect(down.status).toBe(200);
      expect(exposed(down)).toMatchObject({ allowed: true, degraded: 'allow' });
      expect(failures.length).toBeGreaterThanOrEqual(1);
      expect(failures[0]?.probe).toBe('down');
      expect(failures[0]?.error).toBeInstanceOf(SentinelError);
      // The circuit breaker then skips the dead store: still admitted, never a 5xx.
      const later = await getMany(app, 5, '/', { 'x-probe': 'later' });
      expect(later.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
      expect(failures.every((f) => f.probe !== 'healthy')).toBe(true);
    });

    it("fails closed with onStoreError 'deny': a 503 problem that leaks nothing", async () => {
      const { app, failures } = await appWithRedisDown(driver, { onStoreError: 'deny' });
      const replies = await getMany(app, 4, '/', { 'x-probe': 'down' });
      expect(replies.map((r) => r.status)).toEqual([503, 503, 503, 503]);
      const [first] = replies;
      expect(first?.headers.get('content-type')).toMatch(/^application\/problem\+json\b/);
      expect(first?.body).toEqual({
        type: 'about:blank',
        title: 'Service Unavailable',
        status: 503,
        detail: expect.any(String),
      });
      expect(first?.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
      // The store's own error message (ioredis, sockets) stays in onError, out of the response.
      for (const failure of failures) expect(first?.text).not.toContain(failure.error.message);
      expect(failures[0]?.probe).toBe('down');
    });

    it('claims no quota while Redis is down, in every header format, yet names the policy', async () => {
      const { apps, healthy, failures } = await appsWithRedisDown(
        driver,
        FORMATS.map(({ headers }) => ({ headers })),
      );
      for (const [i, format] of FORMATS.entries()) {
        // The same app told the state while it knew it.
        expect(rateLimitHeaderNames(healthy[i]?.headers ?? new Headers()).sort()).toEqual(
          format.full,
        );
        const down = await (apps[i] as App).get('/', { 'x-probe': 'down' });
        expect(down.status, format.headers).toBe(200);
        expect(exposed(down)).toMatchObject({ degraded: 'allow' });
        expect(rateLimitFields(down), format.headers).toEqual(format.policyOnly);
      }
      expect(failures.length).toBeGreaterThanOrEqual(1);
    });

    it('claims no quota on a 503 when failing closed, in every header format', async () => {
      const { apps } = await appsWithRedisDown(
        driver,
        FORMATS.map(({ headers }) => ({ headers, onStoreError: 'deny' as const })),
      );
      for (const [i, format] of FORMATS.entries()) {
        const down = await (apps[i] as App).get('/', { 'x-probe': 'down' });
        expect(down.status, format.headers).toBe(503);
        expect(rateLimitFields(down), format.headers).toEqual(format.policyOnly);
        expect(down.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
      }
    });

    it('keeps admitting in shadow mode even when failing closed', async () => {
      const { app, failures } = await appWithRedisDown(driver, {
        onStoreError: 'deny',
        mode: 'shadow',
      });
      const replies = await getMany(app, 3, '/', { 'x-probe': 'down' });
      expect(replies.map((r) => r.status)).toEqual([200, 200, 200]);
      expect(exposed(replies[0])).toMatchObject({ allowed: false, degraded: 'deny' });
      expect(failures[0]?.probe).toBe('down');
    });
  },
  ['redis'],
);

conformance((driver, storeName: StoreName) => {
  async function goldApp(onStoreError: 'allow' | 'deny', failures: Failure[]): Promise<App> {
    return startApp(driver, {
      options: {
        ...useStore(storeName).options,
        tiers: { FREE: { limit: 1, window: '1m' }, PRO: { limit: 5, window: '1m' } },
        // A lookup that names a tier the limiter was never given.
        identify: () => ({ key: 'tenant:gold', tier: 'GOLD' }),
        onStoreError,
        onError: recorder(failures),
      },
    });
  }

  it('reports an unknown tier on every request, and fails open by default', async () => {
    const failures: Failure[] = [];
    const app = await goldApp('allow', failures);
    const replies = await getMany(app, 3, '/', { 'x-probe': 'gold' });
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(failures.map((f) => f.probe)).toEqual(['gold', 'gold', 'gold']);
    expect(failures[0]?.error).toMatchObject({ name: 'SentinelError', code: 'UNKNOWN_TIER' });
    expect(failures[0]?.error.message).toContain('GOLD');
  });

  it('claims no quota for an unknown tier, in every header format, yet names the policy', async () => {
    for (const format of FORMATS) {
      const app = await startApp(driver, {
        options: {
          ...useStore(storeName).options,
          headers: format.headers,
          // Named as the Redis-down scenarios' policy, to share their expected fields.
          tiers: { FREE: { name: '100-per-1m', limit: 100, window: '1m' } },
          identify: (req) => ({ key: 'tenant:gold', tier: String(req.headers['x-tier']) }),
          onError: () => {},
        },
      });
      const known = await app.get('/', { 'x-tier': 'FREE' });
      expect(rateLimitHeaderNames(known.headers).sort(), format.headers).toEqual(format.full);
      const gold = await app.get('/', { 'x-tier': 'GOLD' });
      expect(gold.status).toBe(200);
      expect(rateLimitFields(gold), format.headers).toEqual(format.policyOnly);
    }
  });

  it("answers an unknown tier with 503 under onStoreError 'deny'", async () => {
    const failures: Failure[] = [];
    const app = await goldApp('deny', failures);
    const reply = await app.get('/', { 'x-probe': 'gold' });
    expect(reply.status).toBe(503);
    expect(reply.headers.get('content-type')).toMatch(/^application\/problem\+json\b/);
    expect(reply.body).toMatchObject({ status: 503, title: 'Service Unavailable' });
    expect(failures.map((f) => f.error)).toMatchObject([{ code: 'UNKNOWN_TIER' }]);
  });

  it('reports an identify that throws and fails open, or closed under deny', async () => {
    const failures: Failure[] = [];
    const options = {
      limit: 5,
      window: '1m',
      onError: recorder(failures),
      identify: () => {
        throw new Error('directory offline');
      },
    } as const;
    const open = await startApp(driver, {
      options: { ...useStore(storeName).options, ...options },
    });
    const admitted = await open.get('/', { 'x-probe': 'open' });
    expect(admitted.status).toBe(200);
    expect(exposed(admitted)).toBeNull();
    const closed = await startApp(driver, {
      options: { ...useStore(storeName).options, ...options, onStoreError: 'deny' },
    });
    const refused = await closed.get('/', { 'x-probe': 'closed' });
    expect(refused.status).toBe(503);
    expect(refused.body).toMatchObject({ status: 503, title: 'Service Unavailable' });
    expect(refused.text).not.toContain('directory offline');
    expect(failures.map((f) => [f.probe, f.error.message])).toEqual([
      ['open', 'directory offline'],
      ['closed', 'directory offline'],
    ]);
  });

  // What the request gets is the failure mode's answer, as for a store failure: the README says so.
  it.each(MISUSES)(
    'reports %s on every request, passing it or answering 503 under deny',
    async (_, misuse, message) => {
      const failures: Failure[] = [];
      const options = {
        ...useStore(storeName).options,
        limit: 5,
        window: '1m',
        onError: recorder(failures),
        ...misuse,
      } satisfies HttpLimiterOptions;
      const open = await startApp(driver, { options });
      const passed = await getMany(open, 3, '/', { 'x-probe': 'open' });
      expect(passed.map((r) => r.status)).toEqual([200, 200, 200]);
      expect(passed.map((r) => exposed(r))).toEqual([null, null, null]);
      expect(passed.map((r) => rateLimitHeaderNames(r.headers))).toEqual([[], [], []]);
      const closed = await startApp(driver, { options: { ...options, onStoreError: 'deny' } });
      const refused = await getMany(closed, 2, '/', { 'x-probe': 'closed' });
      expect(refused.map((r) => r.status)).toEqual([503, 503]);
      expect(refused[0]?.body).toMatchObject({ status: 503, title: 'Service Unavailable' });
      expect(failures.map((f) => f.probe)).toEqual(['open', 'open', 'open', 'closed', 'closed']);
      for (const { error } of failures) expect(error.message).toContain(message);
    },
  );
});
