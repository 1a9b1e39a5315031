// Quota leases in the scripts: taken as a debit, kept from refilling while out, ended by return
// or by time, for every rate algorithm, on a clock the test steps.

import { describe, expect, it } from 'vitest';
import { connect, uniquePrefix } from '../../../../test/harness/clients.ts';
import { type Algorithm, RedisStore, type StoreReply, type Window } from '../../src/index.ts';
import { resolvePlan } from '../../src/limiter/policy.ts';
import { runScriptsOn } from '../../src/stores/redis/script-clock.ts';
import { IdentityRequest, KeyLayout } from '../../src/stores/store-keys.ts';
import { manualClock } from '../stores.ts';

const LIMIT = 100;
const WINDOW = 10_000;

/** A store on a stepped clock, and the calls of one identity under one policy of `algorithm`. */
function bucket(algorithm: Algorithm, blockFor?: Window) {
  // Window-aligned, so that a fixed window runs from the start.
  const clock = manualClock(Date.UTC(2026, 0, 1));
  const store = runScriptsOn(new RedisStore({ client: connect() }), clock.now);
  const plan = resolvePlan(
    { limit: LIMIT, window: WINDOW, algorithm, ...(blockFor && { blockFor }) },
    'policies',
  );
  const layout = new KeyLayout(uniquePrefix('quota-scripts'), plan);
  const request = (cost: number, apply: boolean) =>
    new IdentityRequest('id', layout, cost, apply, clock.now());
  return {
    clock,
    /** A consume of `cost` that takes a lease of `units` for `ms`, named `id`. */
    take(cost: number, units: number, ms: number, id = 'a1'): Promise<StoreReply> {
      const call = request(cost, true);
      call.quota = { units, ms, id };
      return store.evaluate(call) as Promise<StoreReply>;
    },
    consume: (cost = 1) => store.evaluate(request(cost, true)) as Promise<StoreReply>,
    left: async () =>
      ((await store.evaluate(request(1, false))) as StoreReply).policies[0]?.remaining,
    /** Gives back `cost` of a consume charged at `at` (Unix ms). */
    refund(cost: number, at: number): Promise<StoreReply> {
      const call = request(cost, false);
      call.adjust = { kind: 'refund', at };
      return store.evaluate(call) as Promise<StoreReply>;
    },
    /** Ends lease `id` taken at `at` (Unix ms) and ending at `ends`, giving back `unused`. */
    end(unused: number, at: number, ends: number, id = 'a1'): Promise<StoreReply> {
      const call = request(unused, false);
      call.adjust = { kind: 'quota', at, ends, id };
      return store.evaluate(call) as Promise<StoreReply>;
    },
  };
}

describe('a quota lease in the scripts', () => {
  for (const algorithm of [
    'token-bucket',
    'gcra',
    'fixed-window',
    'sliding-window-counter',
    'sliding-window-log',
  ] as const) {
    it(`${algorithm}: is a debit of its units, all or none, and its return gives back the unused`, async () => {
      const b = bucket(algorithm);
      const taken = await b.take(1, 50, 1_000);
      expect(taken.allowed).toBe(true);
      expect(taken.leased).toEqual({ units: 50, ms: 1_000 });
      expect(taken.policies[0]?.remaining).toBe(49);
      // Too large to fit: the consume alone, with no lease.
      const big = await b.take(1, 49, 1_000, 'a2');
      expect(big.allowed).toBe(true);
      expect(big.leased).toEqual({ units: 0, ms: 0 });
      expect(await b.left()).toBe(48);
      b.clock.advance(1);
      // 30 of the 50 were spent; 20 go back.
      await b.end(20, taken.at as number, (taken.at as number) + 1_000);
      const left = await b.left();
      expect(left).toBeGreaterThanOrEqual(68);
      // The token bucket and GCRA refilled a tenth of a unit in that ms: nothing whole.
      expect(left).toBeLessThanOrEqual(68);
    });
  }

  it('a lease that does not fit puts no one in the penalty box', async () => {
    const b = bucket('fixed-window', '1m');
    const taken = await b.take(1, LIMIT, 1_000);
    expect(taken.allowed).toBe(true);
    expect(taken.leased?.units).toBe(0);
    expect((await b.consume()).allowed).toBe(true);
  });

  for (const algorithm of ['token-bucket', 'gcra'] as const) {
    it(`${algorithm}: units out on a lease keep occupying the bucket, however long it refills`, async () => {
      const b = bucket(algorithm);
      // 10 units a second refill; 50 go out for 8 s.
      await b.take(1, 50, 8_000);
      b.clock.advance(5_000);
      // Refilled without the cap, the bucket would hold 99 beside the 50 out: a double burst.
      expect(await b.left()).toBe(50);
      const burst = [];
      for (let i = 0; i < 60; i++) burst.push((await b.consume()).allowed);
      expect(burst.filter(Boolean)).toHaveLength(50);
    });

    it(`${algorithm}: a lease never returned counts as spent at its end, and refills from then`, async () => {
      const b = bucket(algorithm);
      await b.take(1, 50, 2_000);
      b.clock.advance(2_000);
      // At its end: the capacity less its 50, and the 49 left since then refilled to that cap.
      expect(await b.left()).toBe(50);
      b.clock.advance(1_000);
      expect(await b.left()).toBe(60);
      b.clock.advance(5_000);
      expect(await b.left()).toBe(LIMIT);
    });

    it(`${algorithm}: a return after the lease's end gives nothing back`, async () => {
      const b = bucket(algorithm);
      const taken = await b.take(1, 50, 1_000);
      b.clock.advance(1_000);
      await b.end(50, taken.at as number, (taken.at as number) + 1_000);
      expect(await b.left()).toBe(50);
    });

    it(`${algorithm}: a refund never fills the bucket past the units out`, async () => {
      const b = bucket(algorithm);
      const taken = await b.take(1, 50, 8_000);
      b.clock.advance(4_000);
      await b.refund(1, taken.at as number);
      expect(await b.left()).toBe(50);
    });
  }

  it('fixed window: a lease ends with the window it counts in', async () => {
    const b = bucket('fixed-window');
    b.clock.advance(WINDOW - 300);
    const taken = await b.take(1, 50, 1_000);
    expect(taken.leased).toEqual({ units: 50, ms: 300 });
  });

  it('sliding window counter: a lease ends with the fixed window it counts in', async () => {
    const b = bucket('sliding-window-counter');
    b.clock.advance(WINDOW - 300);
    const taken = await b.take(1, 50, 1_000);
    expect(taken.leased).toEqual({ units: 50, ms: 300 });
  });

  it('sliding window log: units are recorded at the lease end, and count a window from there', async () => {
    const b = bucket('sliding-window-log');
    await b.take(1, 50, 2_000);
    // The consume at 0 has left the window at WINDOW; the lease's 50 leave it at WINDOW + 2 s.
    b.clock.advance(WINDOW + 1);
    expect(await b.left()).toBe(50);
    b.clock.advance(2_000);
    expect(await b.left()).toBe(LIMIT);
  });
});
