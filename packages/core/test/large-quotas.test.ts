// Quotas of up to 10^9 over windows of up to 365 days, exact on every store; the log's honest cap.
import { afterEach, describe, expect, it } from 'vitest';
import { createLimiter, type Limiter, MemoryStore } from '../src/index.ts';
import { MAX_LOG_LIMIT } from '../src/policy.ts';
import { type Clock, limiterOn, manualClock, STORES } from './stores.ts';

const DAY = 86_400_000;
/** Monthly and yearly quotas an API business sells, each past 2^53 as limit × window ms. */
const QUOTAS = [
  { limit: 5_000_000, windowMs: 30 * DAY },
  { limit: 10_000_000, windowMs: 30 * DAY },
  { limit: 1_000_000_000, windowMs: DAY },
  { limit: 1_000_000_000, windowMs: 365 * DAY },
] as const;
const RATE_ALGORITHMS = ['token-bucket', 'gcra'] as const;

let limiter: Limiter | undefined;
afterEach(async () => {
  await limiter?.close();
  limiter = undefined;
});

describe.each(STORES)('large quotas on the %s store', (store) => {
  describe.each(QUOTAS)('$limit per $windowMs ms', ({ limit, windowMs }) => {
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
        // One token comes back every window / limit ms.
        expect(over.retryAfterMs).toBe(Math.ceil(windowMs / limit));
        expect(over.remaining).toBe(1);
        expect(await limited.consume('big')).toMatchObject({ allowed: true, remaining: 0 });
        const empty = await limited.consume('big');
        expect(empty.allowed).toBe(false);
        expect(empty.resetMs).toBe(windowMs);
        clock.advance(empty.retryAfterMs - 1);
        expect((await limited.consume('big')).allowed).toBe(false);
        clock.advance(1);
        // From empty, t ms refill floor(t × limit / window) tokens, to the unit.
        const refilled = (ms: number) => Number((BigInt(ms) * BigInt(limit)) / BigInt(windowMs));
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

    it('admits exactly the limit with fixed-window, and all of it again next window', async () => {
      const clock = manualClock(Date.UTC(2030, 0, 1));
      const limited = on('fixed-window', clock);
      const first = await limited.consume('big', { cost: limit - 1 });
      expect(first).toMatchObject({ allowed: true, remaining: 1 });
      expect((await limited.consume('big', { cost: 2 })).allowed).toBe(false);
      expect(await limited.consume('big')).toMatchObject({ allowed: true, remaining: 0 });
      const full = await limited.consume('big');
      expect(full.allowed).toBe(false);
      clock.advance(full.retryAfterMs);
      expect(await limited.consume('big', { cost: limit })).toMatchObject({
        allowed: true,
        remaining: 0,
      });
    });
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
