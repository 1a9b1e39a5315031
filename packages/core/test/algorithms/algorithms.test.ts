// Semantics every algorithm shares, on every store: limit, cost, honest retry and reset times, peek, reset.
import { describe, expect, it } from 'vitest';
import { ALGORITHMS, type Algorithm, type Decision, type Limiter } from '../../src/index.ts';
import { type Clock, limiterOn, manualClock, STORES, type StoreName } from '../stores.ts';

const WINDOW_MS = 60_000;

function setup(store: StoreName, algorithm: Algorithm, limit: number) {
  const clock = manualClock();
  const limiter = limiterOn(store, { limit, window: '1m', algorithm, clock: clock.now });
  return { clock, limiter };
}

/**
 * Checks that a rejection's retryAfterMs is exact: one ms sooner the same request is still
 * refused (and told to wait 1 ms), at retryAfterMs it is admitted.
 */
async function expectHonestRetry(
  limiter: Limiter,
  clock: Clock,
  key: string,
  rejected: Decision,
  cost: number,
): Promise<Decision> {
  expect(rejected.allowed).toBe(false);
  const wait = rejected.retryAfterMs;
  expect(Number.isInteger(wait)).toBe(true);
  expect(wait).toBeGreaterThan(0);
  clock.advance(wait - 1);
  const early = await limiter.consume(key, { cost });
  expect(early).toMatchObject({ allowed: false, retryAfterMs: 1 });
  clock.advance(1);
  const admitted = await limiter.consume(key, { cost });
  expect(admitted).toMatchObject({ allowed: true, retryAfterMs: 0 });
  return admitted;
}

/** Consumes `cost` until refused; returns how many were admitted and the refusal. */
async function drain(limiter: Limiter, key: string, cost: number, max: number) {
  for (let admitted = 0; admitted <= max; admitted++) {
    const decision = await limiter.consume(key, { cost });
    if (!decision.allowed) return { admitted, rejected: decision };
  }
  throw new Error(`still admitting after ${max} requests of cost ${cost}`);
}

describe.each(STORES)('with the %s store', (store) => {
  describe.each(ALGORITHMS)('%s', (algorithm) => {
    describe('limit and remaining', () => {
      it('admits exactly the limit, counting remaining down, then rejects', async () => {
        const { limiter } = setup(store, algorithm, 5);
        for (let i = 1; i <= 5; i++) {
          const decision = await limiter.consume('client');
          expect(decision).toMatchObject({
            allowed: true,
            limit: 5,
            remaining: 5 - i,
            retryAfterMs: 0,
            policy: '5-per-1m',
          });
          expect(decision.policies).toHaveLength(1);
          expect(decision.policies[0]).toMatchObject({ algorithm, windowMs: WINDOW_MS });
        }
        const rejected = await limiter.consume('client');
        expect(rejected).toMatchObject({ allowed: false, limit: 5, remaining: 0 });
        expect(rejected.retryAfterMs).toBeGreaterThan(0);
        expect(rejected.retryAfterMs).toBeLessThanOrEqual(2 * WINDOW_MS);
      });

      it('keeps each key separate', async () => {
        const { limiter } = setup(store, algorithm, 2);
        await limiter.consume('a');
        await limiter.consume('a');
        expect((await limiter.consume('a')).allowed).toBe(false);
        expect(await limiter.consume('b')).toMatchObject({ allowed: true, remaining: 1 });
      });

      it('consumes nothing on rejection: many refused requests leave the retry time unchanged', async () => {
        const { clock, limiter } = setup(store, algorithm, 5);
        clock.advance(7_300);
        const { admitted, rejected } = await drain(limiter, 'client', 1, 5);
        expect(admitted).toBe(5);
        for (let i = 0; i < 20; i++) {
          const again = await limiter.consume('client');
          expect(again).toMatchObject({
            allowed: false,
            remaining: 0,
            retryAfterMs: rejected.retryAfterMs,
          });
        }
        await expectHonestRetry(limiter, clock, 'client', rejected, 1);
      });
    });

    describe('retryAfterMs', () => {
      // Steps of [clock advance, cost]: each drains at that cost, then checks the refusal's wait.
      // Odd advances land at varied points of windows and refills.
      const steps: Array<[number, number]> = [
        [7_300, 1],
        [0, 3],
        [13_777, 2],
        [41_001, 5],
        [95_432, 4],
        [1, 1],
        [30_017, 2],
      ];

      // 7 per 61001 ms makes every refill interval and window overlap a fraction of a ms.
      it.each([
        [5, 60_000],
        [7, 61_001],
      ])(
        'is exact for every cost at %i per %i ms: refused 1 ms sooner, admitted at that time',
        async (limit, windowMs) => {
          const clock = manualClock();
          const limiter = limiterOn(store, {
            limit,
            window: windowMs,
            algorithm,
            clock: clock.now,
          });
          for (const [advance, cost] of steps) {
            clock.advance(advance);
            const { rejected } = await drain(limiter, 'client', cost, limit);
            expect(rejected.retryAfterMs).toBeLessThanOrEqual(2 * windowMs);
            await expectHonestRetry(limiter, clock, 'client', rejected, cost);
          }
        },
      );

      it('is 0 whenever a request is admitted', async () => {
        const { clock, limiter } = setup(store, algorithm, 5);
        clock.advance(12_345);
        expect((await limiter.consume('client', { cost: 2 })).retryAfterMs).toBe(0);
        expect((await limiter.consume('client', { cost: 3 })).retryAfterMs).toBe(0);
      });
    });

    describe('cost', () => {
      it('takes c units for a request of cost c', async () => {
        const { limiter } = setup(store, algorithm, 10);
        expect(await limiter.consume('client', { cost: 3 })).toMatchObject({
          allowed: true,
          remaining: 7,
        });
        expect(await limiter.consume('client', { cost: 4 })).toMatchObject({
          allowed: true,
          remaining: 3,
        });
        expect(await limiter.consume('client', { cost: 3 })).toMatchObject({
          allowed: true,
          remaining: 0,
        });
        expect((await limiter.consume('client')).allowed).toBe(false);
      });

      it('admits a cost equal to the limit on a fresh key', async () => {
        const { limiter } = setup(store, algorithm, 10);
        expect(await limiter.consume('client', { cost: 10 })).toMatchObject({
          allowed: true,
          remaining: 0,
        });
      });

      it('refuses a cost above the limit with retryAfterMs Infinity, consuming nothing', async () => {
        const { clock, limiter } = setup(store, algorithm, 10);
        const fresh = await limiter.consume('client', { cost: 11 });
        expect(fresh).toMatchObject({ allowed: false, remaining: 10 });
        expect(fresh.retryAfterMs).toBe(Number.POSITIVE_INFINITY);
        expect(fresh.policies[0]?.retryAfterMs).toBe(Number.POSITIVE_INFINITY);

        clock.advance(5_000);
        await limiter.consume('client', { cost: 4 });
        const used = await limiter.consume('client', { cost: 1_000 });
        expect(used).toMatchObject({ allowed: false, remaining: 6 });
        expect(used.retryAfterMs).toBe(Number.POSITIVE_INFINITY);
        // Nothing was taken by either refusal: the 6 left are all there.
        expect(await limiter.consume('client', { cost: 6 })).toMatchObject({
          allowed: true,
          remaining: 0,
        });
      });

      it('refuses a request that does not fit without consuming, so a cheaper one still fits', async () => {
        const { clock, limiter } = setup(store, algorithm, 10);
        clock.advance(3_210);
        await limiter.consume('client', { cost: 7 });
        const refused = await limiter.consume('client', { cost: 4 });
        expect(refused).toMatchObject({ allowed: false, remaining: 3 });
        expect(Number.isFinite(refused.retryAfterMs)).toBe(true);
        expect(await limiter.consume('client', { cost: 3 })).toMatchObject({
          allowed: true,
          remaining: 0,
        });
      });
    });

    describe('resetMs', () => {
      it('is 0 on a fresh key and the exact time until the key is full again', async () => {
        const { clock, limiter } = setup(store, algorithm, 5);
        expect(await limiter.peek('client')).toMatchObject({ remaining: 5, resetMs: 0 });
        clock.advance(9_876);
        const { resetMs } = await limiter.consume('client', { cost: 3 });
        expect(resetMs).toBeGreaterThan(0);
        expect(resetMs).toBeLessThanOrEqual(2 * WINDOW_MS);
        clock.advance(resetMs - 1);
        const before = await limiter.peek('client');
        expect(before.remaining).toBeLessThan(5);
        expect(before.resetMs).toBe(1);
        clock.advance(1);
        expect(await limiter.peek('client')).toMatchObject({ remaining: 5, resetMs: 0 });
        expect(await limiter.consume('client', { cost: 5 })).toMatchObject({ allowed: true });
      });
    });

    describe('peek', () => {
      it('never consumes: decisions match a key that was never peeked', async () => {
        const { clock, limiter } = setup(store, algorithm, 4);
        const peekedDecisions: Decision[] = [];
        const plainDecisions: Decision[] = [];
        for (const advance of [0, 1_500, 0, 0, 0, 0, 17_000, 0, 31_000]) {
          clock.advance(advance);
          const peeks = await Promise.all([1, 2, 3].map(() => limiter.peek('peeked')));
          for (const peek of peeks) expect(peek).toEqual(peeks[0]);
          peekedDecisions.push(await limiter.consume('peeked'));
          plainDecisions.push(await limiter.consume('plain'));
        }
        expect(peekedDecisions).toEqual(plainDecisions);
        // The sequence reached a refusal, so peeks were tried on a blocked key too.
        expect(plainDecisions.some((d) => !d.allowed)).toBe(true);
      });

      it('leaves remaining unchanged however often it is called', async () => {
        const { limiter } = setup(store, algorithm, 5);
        await limiter.consume('client', { cost: 2 });
        for (let i = 0; i < 10; i++) {
          expect(await limiter.peek('client', { cost: 2 })).toMatchObject({
            allowed: true,
            remaining: 3,
          });
        }
        expect(await limiter.consume('client')).toMatchObject({ allowed: true, remaining: 2 });
      });

      it('reports the refusal and the wait that consume would, without consuming', async () => {
        const { clock, limiter } = setup(store, algorithm, 3);
        clock.advance(2_222);
        await drain(limiter, 'client', 1, 3);
        const peeked = await limiter.peek('client');
        const consumed = await limiter.consume('client');
        expect(peeked).toEqual(consumed);
        expect(peeked.allowed).toBe(false);
        clock.advance(peeked.retryAfterMs);
        expect((await limiter.peek('client')).allowed).toBe(true);
        expect((await limiter.consume('client')).allowed).toBe(true);
      });
    });

    describe('reset', () => {
      it('deletes the state, so the full limit is available again', async () => {
        const { clock, limiter } = setup(store, algorithm, 5);
        clock.advance(4_321);
        await drain(limiter, 'client', 1, 5);
        await limiter.consume('other', { cost: 2 });
        await limiter.reset('client');
        expect(await limiter.peek('client')).toMatchObject({
          allowed: true,
          remaining: 5,
          resetMs: 0,
        });
        for (let i = 4; i >= 0; i--) {
          expect(await limiter.consume('client')).toMatchObject({ allowed: true, remaining: i });
        }
        expect((await limiter.consume('client')).allowed).toBe(false);
        // Other keys keep their state.
        expect((await limiter.peek('other')).remaining).toBe(3);
      });
    });
  });
});
