// Races 2000 requests for one tenant across 4 gateway processes per adapter on one Redis: exactly the limit.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADAPTERS,
  answeringAtOnce,
  awayFromWindowEdge,
  type Fleet,
  freshTenant,
  MULTI_POLICIES,
  race,
  startGateways,
} from '../../examples/race-demo/fleet.ts';
import { ALGORITHMS, byHeader, createLimiter } from '../../packages/core/src/index.ts';
import { connect, uniquePrefix } from '../harness/clients.ts';
import { besideCpuHog } from '../harness/cpu-hog.ts';
import { type RedisProcess, startRedis } from '../harness/redis-server.ts';

const GATEWAYS = 4;
const REQUESTS = 2000;
const LIMIT = 100;
const HOUR_MS = 3_600_000;

/** Each gateway exposes every decision's degraded mode: the races count those too. */
function outcome(result: Awaited<ReturnType<typeof race>>) {
  return { statuses: result.statuses, degraded: result.degraded };
}

describe.each(ADAPTERS)('four %s gateway processes sharing one Redis', (adapter) => {
  const prefix = uniquePrefix(`race-${adapter}`);
  let server: RedisProcess | undefined;
  let fleet: Fleet | undefined;
  const gateways = () => (fleet as Fleet).gateways;
  const admin = () => connect('ioredis 6', (server as RedisProcess).url);

  beforeAll(async () => {
    // A Redis of their own, with no script loaded: the first race of each algorithm (each has
    // its own script) meets NOSCRIPT in every gateway at once. The gateways run with the
    // limiter's default options: a deadline of 50 ms.
    server = await startRedis();
    const redisUrl = server.url;
    fleet = await startGateways(
      Array.from({ length: GATEWAYS }, () => ({ adapter, redisUrl, prefix })),
    );
  });
  afterAll(async () => {
    await fleet?.stop();
    await server?.stop();
  });

  it.each(ALGORITHMS)(
    'admits exactly 100 of 2000 concurrent requests spread over the gateways with %s',
    async (algorithm) => {
      // An hourly fixed window that rolled over mid-race would rightly admit a second 100.
      if (algorithm === 'fixed-window') await awayFromWindowEdge(admin(), HOUR_MS);
      const result = await race(gateways(), `/${algorithm}`, freshTenant(algorithm), REQUESTS);
      // Every admission came from Redis's script, none from `onStoreError` after a missed deadline.
      expect(outcome(result)).toEqual({
        statuses: { 200: LIMIT, 429: REQUESTS - LIMIT },
        degraded: 0,
      });
      // Several processes were deciding at once. Which of them admitted the 100 is the
      // scheduler's choice: beside other load one process can take them all.
      expect(answeringAtOnce(result), JSON.stringify(result)).toBeGreaterThan(1);
    },
  );

  it('admits all-or-nothing under two policies: exactly 60, leaving the hourly policy 40', async () => {
    const tenant = freshTenant('multi');
    const result = await race(gateways(), '/multi', tenant, REQUESTS);
    expect(outcome(result)).toEqual({
      statuses: { 200: 60, 429: REQUESTS - 60 },
      degraded: 0,
    });

    // Refused requests consumed nothing from the hourly policy, in any process.
    const observer = createLimiter({
      redis: admin(),
      prefix: `${prefix}:multi`,
      policies: MULTI_POLICIES,
    });
    // The key the gateways' identifier derives from the tenant header.
    const identity = await byHeader('x-tenant-id', { trusted: true })({
      headers: { 'x-tenant-id': tenant },
    });
    if (!identity || identity === 'unauthorized') throw new Error('no identity');
    try {
      const { policies } = await observer.peek(identity.key);
      expect(policies.map(({ policy, remaining }) => ({ policy, remaining }))).toEqual([
        { policy: 'hourly', remaining: 40 },
        { policy: 'burst', remaining: 0 },
      ]);
    } finally {
      await observer.close();
    }
  });

  it('shows a read-decide-write limiter on the same Redis admitting more than 100', async () => {
    const result = await race(gateways(), '/naive', freshTenant('naive'), REQUESTS);
    expect(result.admitted).toBeGreaterThan(LIMIT);
    expect(result.admitted + (result.statuses[429] ?? 0)).toBe(REQUESTS);
  });
});

describe.each(ADAPTERS)(
  'four new %s gateway processes on a new Redis, beside a CPU hog',
  (adapter) => {
    it('admit exactly 100 of the first 2000 concurrent requests, none degraded', () =>
      besideCpuHog(async () => {
        const server = await startRedis();
        const prefix = uniquePrefix(`cold-${adapter}`);
        const fleet = await startGateways(
          Array.from({ length: GATEWAYS }, () => ({ adapter, redisUrl: server.url, prefix })),
        ).catch(async (error: unknown) => {
          await server.stop();
          throw error;
        });
        try {
          const result = await race(fleet.gateways, '/token-bucket', freshTenant('cold'), REQUESTS);
          expect(outcome(result)).toEqual({
            statuses: { 200: LIMIT, 429: REQUESTS - LIMIT },
            degraded: 0,
          });
        } finally {
          await fleet.stop();
          await server.stop();
        }
      }));
  },
);
