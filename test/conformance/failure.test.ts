// Failures in a running app (Redis down, unknown tier, identify throws): fail open or answer 503.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { afterEach, expect, it } from 'vitest';
import {
  type HttpLimiterOptions,
  type RequestLike,
  SentinelError,
} from '../../packages/core/src/index.ts';
import type { AdapterDriver } from '../adapters/driver.ts';
import { connect, uniquePrefix } from '../harness/clients.ts';
import { type RedisProcess, startRedis } from '../harness/redis-server.ts';
import {
  type App,
  conformance,
  exposed,
  getMany,
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

async function waitFor(condition: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${ms} ms`);
    await sleep(10);
  }
}

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

/**
 * An app on a Redis server of its own, proven healthy by one admitted request, whose server is
 * then stopped; every error reaching onError is recorded with the request's probe header.
 */
async function appWithRedisDown(
  driver: AdapterDriver,
  options: Partial<HttpLimiterOptions> = {},
): Promise<{ app: App; failures: Failure[] }> {
  const server = await startRedis();
  servers.push(server);
  const client = connect('ioredis 6', server.url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
  });
  clients.push(client);
  await waitFor(() => client.status === 'ready');
  const failures: Failure[] = [];
  const app = await startApp(driver, {
    options: {
      redis: client,
      prefix: uniquePrefix('conformance-failure'),
      limit: 100,
      window: '1m',
      onError: recorder(failures),
      ...options,
    },
  });
  const healthy = await app.get('/', { 'x-probe': 'healthy' });
  expect(healthy.status).toBe(200);
  expect(exposed(healthy)?.degraded).toBeUndefined();
  await server.stop();
  await waitFor(() => client.status !== 'ready');
  return { app, failures };
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
});
