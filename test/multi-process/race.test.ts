// Races 2000 requests for one tenant across 4 gateway processes per adapter on one Redis: exactly the limit.
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ALGORITHMS, byHeader, createLimiter } from '../../packages/core/src/index.ts';
import { connect, uniquePrefix } from '../harness/clients.ts';
import {
  ADAPTERS,
  awayFromWindowEdge,
  type Fleet,
  freshTenant,
  MULTI_POLICIES,
  race,
  startGateways,
} from '../harness/gateways.ts';

const GATEWAYS = 4;
const REQUESTS = 2000;
const LIMIT = 100;
const HOUR_MS = 3_600_000;

describe.each(ADAPTERS)('four %s gateway processes sharing one Redis', (adapter) => {
  const prefix = uniquePrefix(`race-${adapter}`);
  let fleet: Fleet | undefined;
  const gateways = () => (fleet as Fleet).gateways;

  beforeAll(async () => {
    fleet = await startGateways(
      Array.from({ length: GATEWAYS }, () => ({ adapter, redisUrl: inject('redisUrl'), prefix })),
    );
  });
  afterAll(async () => {
    await fleet?.stop();
  });

  it.each(ALGORITHMS)(
    'admits exactly 100 of 2000 concurrent requests spread over the gateways with %s',
    async (algorithm) => {
      // An hourly fixed window that rolled over mid-race would rightly admit a second 100.
      if (algorithm === 'fixed-window') await awayFromWindowEdge(connect(), HOUR_MS);
      const result = await race(gateways(), `/${algorithm}`, freshTenant(algorithm), REQUESTS);
      expect(result.statuses).toEqual({ 200: LIMIT, 429: REQUESTS - LIMIT });
      // The admissions really were decided in several processes, not one.
      expect(result.admittedBy.filter((count) => count > 0).length).toBeGreaterThan(1);
    },
  );

  it('admits all-or-nothing under two policies: exactly 60, leaving the hourly policy 40', async () => {
    const tenant = freshTenant('multi');
    const result = await race(gateways(), '/multi', tenant, REQUESTS);
    expect(result.statuses).toEqual({ 200: 60, 429: REQUESTS - 60 });

    // Refused requests consumed nothing from the hourly policy, in any process.
    const observer = createLimiter({
      redis: connect(),
      prefix: `${prefix}:multi`,
      policies: MULTI_POLICIES,
      timeout: 10_000,
    });
    // The key the gateways' identifier derives from the tenant header.
    const identity = await byHeader('x-tenant-id')({ headers: { 'x-tenant-id': tenant } });
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
