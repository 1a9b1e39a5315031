// The window algorithms on every store: epoch-aligned fixed windows, the weighted sliding counter, the exact log.
import { describe, expect, it } from 'vitest';
import { connect, uniquePrefix } from '../../../../test/harness/clients.ts';
import type { Algorithm, Limiter, Window } from '../../src/index.ts';
import { EPOCH_MS } from '../../src/shared/lua-constants.generated.ts';
import { limiterOn, manualClock, STORES, type StoreName } from '../stores.ts';

function setup(store: StoreName, algorithm: Algorithm, limit: number, window: Window) {
  const clock = manualClock();
  const prefix = uniquePrefix('windows');
  const limiter = limiterOn(store, { prefix, limit, window, algorithm, clock: clock.now });
  return { clock, limiter, prefix };
}

async function consumeTimes(limiter: Limiter, key: string, times: number, cost = 1) {
  let admitted = 0;
  for (let i = 0; i < times; i++) if ((await limiter.consume(key, { cost })).allowed) admitted++;
  return admitted;
}

describe.each(STORES)('with the %s store', (store) => {
  describe('fixed-window', () => {
    it.each([
      ['1m', 60_000],
      ['7s', 7_000],
    ] as const)(
      'aligns %s windows to the Unix epoch, so keys consumed at different times reset together',
      async (window, windowMs) => {
        const { clock, limiter } = setup(store, 'fixed-window', 5, window);
        // 1234 ms into a window: a window opened by the first request would end 1234 ms later.
        const start = Math.floor(Date.UTC(2026, 2, 3, 4, 5, 6) / windowMs) * windowMs + 1_234;
        const end = start - 1_234 + windowMs;
        clock.set(start);
        const first = await limiter.consume('a');
        expect(first.resetMs).toBe(end - start);
        expect((clock.now() + first.resetMs) % windowMs).toBe(0);

        clock.set(start + 3_000);
        const second = await limiter.consume('b');
        expect(second.resetMs).toBe(end - clock.now());
        expect((await limiter.peek('a')).resetMs).toBe(second.resetMs);
        expect((await limiter.peek('a', { cost: 5 })).retryAfterMs).toBe(second.resetMs);
      },
    );

    it('restores the full count exactly at the window boundary', async () => {
      const { clock, limiter } = setup(store, 'fixed-window', 5, '1m');
      const windowStart = clock.now();
      clock.advance(20_000);
      expect(await consumeTimes(limiter, 'client', 8)).toBe(5);
      clock.set(windowStart + 60_000 - 1);
      expect(await limiter.consume('client')).toMatchObject({
        allowed: false,
        remaining: 0,
        resetMs: 1,
        retryAfterMs: 1,
      });
      clock.advance(1);
      expect(await limiter.consume('client')).toMatchObject({
        allowed: true,
        remaining: 4,
        resetMs: 60_000,
      });
    });

    it('counts in the later window when the clock steps back across a boundary', async () => {
      const { clock, limiter } = setup(store, 'fixed-window', 5, '1m');
      const windowStart = clock.now();
      clock.advance(30_000);
      expect(await consumeTimes(limiter, 'client', 5)).toBe(5);
      clock.set(windowStart + 60_000 + 10_000);
      expect(await consumeTimes(limiter, 'client', 2)).toBe(2);
      // Back into the full window: the later one's count holds, and so does its end.
      clock.set(windowStart + 50_000);
      expect(await limiter.consume('client')).toMatchObject({
        allowed: true,
        remaining: 2,
        resetMs: 70_000,
      });
      expect(await limiter.peek('client')).toMatchObject({ remaining: 2, resetMs: 70_000 });
      clock.set(windowStart + 60_000 + 20_000);
      expect(await consumeTimes(limiter, 'client', 3)).toBe(2);
    });

    it('admits twice the limit within half a window across a boundary, as fixed windows do', async () => {
      const { clock, limiter } = setup(store, 'fixed-window', 5, '1m');
      // Not at the window's last ms: Redis would expire that key after 1 ms of real time.
      clock.advance(30_000);
      expect(await consumeTimes(limiter, 'client', 6)).toBe(5);
      clock.advance(30_000);
      expect(await consumeTimes(limiter, 'client', 6)).toBe(5);
    });
  });

  describe('sliding-window-counter (10 per minute)', () => {
    const W = 60_000;

    it('weights the previous window by its overlap: 10 last window, 30 s in, exactly 5 more fit', async () => {
      const { clock, limiter } = setup(store, 'sliding-window-counter', 10, '1m');
      const windowK = clock.now();
      clock.advance(10_000);
      expect(await consumeTimes(limiter, 'client', 10)).toBe(10);

      clock.set(windowK + W + 30_000);
      // Half of window k still overlaps: 10 · 0.5 = 5 are taken.
      expect((await limiter.peek('client')).remaining).toBe(5);
      for (let left = 4; left >= 0; left--) {
        expect(await limiter.consume('client')).toMatchObject({ allowed: true, remaining: left });
      }
      const refused = await limiter.consume('client');
      expect(refused.allowed).toBe(false);
      // The 11th in the sliding window fits once 10 · (W - e) / W + 5 + 1 <= 10, at e = 0.6 W.
      const fitsAt = W - Math.floor(((10 - 5 - 1) * W) / 10);
      expect(refused.retryAfterMs).toBe(fitsAt - 30_000);
      clock.advance(refused.retryAfterMs - 1);
      expect(await limiter.consume('client')).toMatchObject({ allowed: false, retryAfterMs: 1 });
      clock.advance(1);
      expect(await limiter.consume('client')).toMatchObject({ allowed: true, remaining: 0 });
    });

    it.each([0, 1, 6_000, 30_000, 45_500, 59_999])(
      'counts a full previous window as floor(10 - 10·(W - e) / W) remaining at e = %i ms',
      async (elapsed) => {
        const { clock, limiter } = setup(store, 'sliding-window-counter', 10, '1m');
        const windowK = clock.now();
        expect(await consumeTimes(limiter, 'client', 10)).toBe(10);
        clock.set(windowK + W + elapsed);
        const expected = Math.floor((10 * W - 10 * (W - elapsed)) / W);
        expect((await limiter.peek('client')).remaining).toBe(expected);
        expect(await consumeTimes(limiter, 'client', 11)).toBe(expected);
      },
    );

    it('sends a request refused in a full window to the next one, with an exact wait', async () => {
      const { clock, limiter } = setup(store, 'sliding-window-counter', 10, '1m');
      clock.advance(10_000);
      expect(await consumeTimes(limiter, 'client', 10)).toBe(10);
      const refused = await limiter.consume('client');
      // Next window: 10 · (W - e) / W + 1 <= 10 from e = W / 10.
      const fitsAt = W - Math.floor(((10 - 1) * W) / 10);
      expect(refused.retryAfterMs).toBe(W - 10_000 + fitsAt);
      clock.advance(refused.retryAfterMs - 1);
      expect(await limiter.consume('client')).toMatchObject({ allowed: false, retryAfterMs: 1 });
      clock.advance(1);
      expect(await limiter.consume('client')).toMatchObject({ allowed: true, remaining: 0 });
    });

    it('forgets a window once it is two windows back', async () => {
      const { clock, limiter } = setup(store, 'sliding-window-counter', 10, '1m');
      const windowK = clock.now();
      clock.advance(59_000);
      expect(await consumeTimes(limiter, 'client', 10)).toBe(10);
      clock.set(windowK + 2 * W - 1);
      expect((await limiter.peek('client')).remaining).toBe(9);
      clock.set(windowK + 2 * W);
      expect(await limiter.peek('client')).toMatchObject({ remaining: 10, resetMs: 0 });
      expect(await consumeTimes(limiter, 'client', 11)).toBe(10);
    });
  });

  describe('sliding-window-log', () => {
    const redisOnly = store.startsWith('redis') ? connect() : undefined;
    const logKey = (prefix: string, policy: string) =>
      `${prefix}:{client}:${policy}:sliding-window-log`;

    it('records only admitted requests, so refused attempts never hold the window shut', async () => {
      const { clock, limiter, prefix } = setup(store, 'sliding-window-log', 3, '10s');
      expect(await consumeTimes(limiter, 'client', 3)).toBe(3);
      for (let second = 1; second <= 9; second++) {
        clock.advance(1_000);
        expect(await consumeTimes(limiter, 'client', 2)).toBe(0);
      }
      if (redisOnly) expect(await redisOnly.zcard(logKey(prefix, '3-per-10s'))).toBe(3);
      clock.advance(1_000);
      expect(await consumeTimes(limiter, 'client', 5)).toBe(3);
      if (redisOnly) expect(await redisOnly.zcard(logKey(prefix, '3-per-10s'))).toBe(3);
    });

    it('keeps requests that share a millisecond distinct', async () => {
      const { clock, limiter, prefix } = setup(store, 'sliding-window-log', 10, '10s');
      expect(await limiter.consume('client', { cost: 3 })).toMatchObject({ remaining: 7 });
      expect(await limiter.consume('client')).toMatchObject({ remaining: 6 });
      expect(await limiter.consume('client')).toMatchObject({ remaining: 5 });
      if (redisOnly) {
        const key = logKey(prefix, '10-per-10s');
        expect(await redisOnly.zcard(key)).toBe(5);
        const entries = await redisOnly.zrange(key, '0', '-1', 'WITHSCORES');
        const members = entries.filter((_, i) => i % 2 === 0);
        const scores = entries.filter((_, i) => i % 2 === 1);
        expect(new Set(members).size).toBe(5);
        expect(new Set(scores)).toEqual(new Set([String(clock.now() - EPOCH_MS)]));
      }
      // All five leave together.
      clock.advance(10_000);
      expect((await limiter.peek('client')).remaining).toBe(10);
    });

    it('keeps members unique when the clock steps back to a millisecond it already used', async () => {
      const { clock, limiter, prefix } = setup(store, 'sliding-window-log', 10, '10s');
      const start = clock.now();
      await limiter.consume('client');
      clock.set(start + 10_000 - 1);
      await limiter.consume('client');
      // One ms later the first entry leaves; then the clock steps back.
      clock.set(start + 10_000);
      expect((await limiter.peek('client')).remaining).toBe(9);
      clock.set(start + 10_000 - 1);
      expect(await limiter.consume('client')).toMatchObject({ allowed: true, remaining: 8 });
      expect((await limiter.peek('client')).remaining).toBe(8);
      if (redisOnly) expect(await redisOnly.zcard(logKey(prefix, '10-per-10s'))).toBe(2);
    });

    it('records a cost larger than one ZADD batch as that many entries', async () => {
      const { limiter, prefix } = setup(store, 'sliding-window-log', 2_000, '1m');
      expect(await limiter.consume('client', { cost: 1_200 })).toMatchObject({
        allowed: true,
        remaining: 800,
      });
      if (redisOnly) expect(await redisOnly.zcard(logKey(prefix, '2000-per-1m'))).toBe(1_200);
      expect(await limiter.consume('client', { cost: 800 })).toMatchObject({
        allowed: true,
        remaining: 0,
      });
      if (redisOnly) expect(await redisOnly.zcard(logKey(prefix, '2000-per-1m'))).toBe(2_000);
      expect((await limiter.consume('client')).allowed).toBe(false);
    });

    it('lets each entry leave exactly one window after it was added', async () => {
      const { clock, limiter } = setup(store, 'sliding-window-log', 5, '10s');
      const start = clock.now();
      await limiter.consume('client');
      clock.set(start + 1_000);
      await limiter.consume('client', { cost: 2 });
      const remainingAt = async (t: number) => {
        clock.set(start + t);
        return (await limiter.peek('client')).remaining;
      };
      expect(await remainingAt(10_000 - 1)).toBe(2);
      expect(await remainingAt(10_000)).toBe(3);
      expect(await remainingAt(11_000 - 1)).toBe(3);
      expect(await remainingAt(11_000)).toBe(5);
    });

    it('waits for as many of the oldest entries to leave as the cost needs', async () => {
      const { clock, limiter } = setup(store, 'sliding-window-log', 5, '10s');
      const start = clock.now();
      for (let i = 0; i < 5; i++) {
        clock.set(start + 1_000 * i);
        await limiter.consume('client');
      }
      clock.set(start + 5_000);
      const refused = await limiter.consume('client', { cost: 3 });
      // Three must leave; the third oldest, added at 2 s, leaves at 12 s.
      expect(refused).toMatchObject({ allowed: false, retryAfterMs: 12_000 - 5_000 });
      expect(refused.resetMs).toBe(14_000 - 5_000);
      clock.set(start + 12_000 - 1);
      expect((await limiter.consume('client', { cost: 3 })).allowed).toBe(false);
      clock.set(start + 12_000);
      expect(await limiter.consume('client', { cost: 3 })).toMatchObject({
        allowed: true,
        remaining: 0,
        resetMs: 10_000,
      });
    });
  });
});
