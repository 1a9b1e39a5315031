// Quotas of up to 10^9 over windows of up to 365 days, exact on every store; the log's honest cap.
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { MUL_DIV_BOUND, mulDiv } from '../../src/algorithms/fixed-point.ts';
import { createLimiter, type Limiter, MemoryStore } from '../../src/index.ts';
import { MAX_LOG_LIMIT } from '../../src/limiter/policy.ts';
import { type Clock, limiterOn, manualClock, STORES } from '../stores.ts';

const DAY = 86_400_000;
/** Monthly and yearly quotas an API business sells, each past 2^53 as limit × window ms. */
const QUOTAS = [
  { limit: 5_000_000, windowMs: 30 * DAY, stepMs: 1 },
  { limit: 10_000_000, windowMs: 30 * DAY, stepMs: 1 },
  { limit: 1_000_000_000, windowMs: DAY, stepMs: 1 },
  { limit: 1_000_000_000, windowMs: 365 * DAY, stepMs: 1 },
  // Prime: no common divisor with the window, so the rate algorithms count time in minutes.
  { limit: 999_999_937, windowMs: 365 * DAY, stepMs: 60_000 },
] as const;
const RATE_ALGORITHMS = ['token-bucket', 'gcra'] as const;

let limiter: Limiter | undefined;
afterEach(async () => {
  await limiter?.close();
  limiter = undefined;
});

describe.each(STORES)('large quotas on the %s store', (store) => {
  describe.each(QUOTAS)('$limit per $windowMs ms', ({ limit, windowMs, stepMs }) => {
    function on(algorithm: string, clock: Clock): Limiter {
      limiter = limiterOn(store, {
        limit,
        window: windowMs,
        algorithm: algorithm as never,
        clock: clock.now,
      });
      return limiter;
    }

    it.each(RATE_ALGORITHMS)(
      'admits exactly the limit with %s, then one more a refill interval later',
      async (algorithm) => {
        const clock = manualClock();
        const limited = on(algorithm, clock);
        const first = await limited.consume('big', { cost: limit - 1 });
        expect(first).toMatchObject({ allowed: true, remaining: 1 });
        const over = await limited.consume('big', { cost: 2 });
        expect(over.allowed).toBe(false);
        // One token comes back every window / limit ms, counted in whole steps of the clock.
        expect(over.retryAfterMs).toBe(stepMs * Math.ceil(windowMs / stepMs / limit));
        expect(over.remaining).toBe(1);
        expect(await limited.consume('big')).toMatchObject({ allowed: true, remaining: 0 });
        const empty = await limited.consume('big');
        expect(empty.allowed).toBe(false);
        expect(empty.resetMs).toBe(windowMs);
        clock.advance(empty.retryAfterMs - 1);
        expect((await limited.consume('big')).allowed).toBe(false);
        clock.advance(1);
        // From empty, t ms refill floor(t × limit / window) tokens, to the unit, t in whole steps.
        const refilled = (ms: number) =>
          Number((BigInt(ms - (ms % stepMs)) * BigInt(limit)) / BigInt(windowMs));
        const waited = empty.retryAfterMs;
        expect(await limited.consume('big')).toMatchObject({
          allowed: true,
          remaining: refilled(waited) - 1,
        });
        clock.advance(windowMs / 2);
        const half = await limited.peek('big');
        expect(half.remaining).toBe(refilled(waited + windowMs / 2) - 1);
      },
    );

    it.each(['fixed-window', 'sliding-window-counter'])(
      'admits exactly the limit with %s, and all of it again once the window has passed',
      async (algorithm) => {
        const clock = manualClock(Date.UTC(2030, 0, 1));
        const limited = on(algorithm, clock);
        const first = await limited.consume('big', { cost: limit - 1 });
        expect(first).toMatchObject({ allowed: true, remaining: 1 });
        expect((await limited.consume('big', { cost: 2 })).allowed).toBe(false);
        expect(await limited.consume('big')).toMatchObject({ allowed: true, remaining: 0 });
        const full = await limited.consume('big');
        expect(full.allowed).toBe(false);
        clock.advance(full.retryAfterMs - 1);
        expect((await limited.consume('big')).allowed).toBe(false);
        clock.advance(1);
        expect((await limited.consume('big')).allowed).toBe(true);
        // A whole window later nothing of it counts, to the unit.
        clock.advance(windowMs * 2);
        expect(await limited.consume('big', { cost: limit })).toMatchObject({
          allowed: true,
          remaining: 0,
        });
      },
    );
  });
});

describe('the sliding-window-log', () => {
  it(`accepts a limit of ${MAX_LOG_LIMIT}, one entry per request`, async () => {
    limiter = createLimiter({
      store: new MemoryStore(),
      limit: MAX_LOG_LIMIT,
      window: '1h',
      algorithm: 'sliding-window-log',
    });
    expect((await limiter.consume('log', { cost: MAX_LOG_LIMIT })).remaining).toBe(0);
  });

  it('refuses a larger limit at construction, pointing to sliding-window-counter', () => {
    const build = () =>
      createLimiter({
        store: new MemoryStore(),
        limit: MAX_LOG_LIMIT + 1,
        window: '30d',
        algorithm: 'sliding-window-log',
      });
    expect(build).toThrow(TypeError);
    expect(build).toThrow(/`limit` .*sliding-window-counter/);
  });
});

describe('the exact multiply-divide behind the sliding-window-counter', () => {
  it('equals floor(a × b / c) computed in big integers, wherever the product passes 2^53', () => {
    const below = fc.integer({ min: 1, max: MUL_DIV_BOUND - 1 });
    fc.assert(
      fc.property(below, fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }), below, (a, b, c) => {
        const exact = (BigInt(a) * BigInt(b)) / BigInt(c);
        fc.pre(exact <= BigInt(Number.MAX_SAFE_INTEGER));
        expect(mulDiv(a, b, c)).toBe(Number(exact));
      }),
      { numRuns: 2_000 },
    );
  });
});
