// The status page's counts: an identity's decisions per second, and apart from them the slots
// in flight and the requests `shed` refused, from a real limiter's events.
import { expect, it } from 'vitest';
import { DecisionStats } from '../../examples/gateway/src/decision-stats.ts';
import { createHttpLimiter, MemoryStore } from '../../packages/core/src/index.ts';

it('counts the fleet apart from the identities, and the slots held until released', async () => {
  const stats = new DecisionStats();
  const limiter = createHttpLimiter({
    store: new MemoryStore(),
    limit: 100,
    window: '1m',
    concurrency: 5,
    shed: { concurrency: 2, reserve: 0.5 },
    observe: stats.observer,
  });
  const req = { headers: {}, ip: '203.0.113.7' };
  const first = await limiter.check(req);
  const second = await limiter.check(req);
  expect([first.action, second.action]).toEqual(['next', 'respond']);
  const snapshot = stats.snapshot();
  // One identity decision (the shed request never reached its own policies), one shed.
  expect(snapshot.totals).toEqual({ allowed: 1, limited: 0, degraded: 0 });
  expect(snapshot.shed).toBe(1);
  // The admitted request holds its identity's slot and the fleet's.
  expect(snapshot.inFlight).toBe(2);
  if (first.action !== 'next' || first.decision === undefined || first.fleet === undefined) {
    throw new Error('not admitted with its slots');
  }
  await limiter.limiter.release(first.decision);
  expect(stats.snapshot().inFlight).toBe(1);
  await limiter.close();
});
