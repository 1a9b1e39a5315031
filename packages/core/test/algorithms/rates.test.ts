// Token bucket and GCRA refill rates on every store: slow rates keep partial tokens, fractional rates stay exact.
import { describe, expect, it } from 'vitest';
import { connect } from '../../../../test/harness/clients.ts';
import { EPOCH_MS } from '../../src/shared/lua-constants.generated.ts';
import { limiterOn, manualClock, STORES } from '../stores.ts';

const RATE_ALGORITHMS = ['token-bucket', 'gcra'] as const;

/**
 * The refill bug the token bucket must not have: the refill clock restarts at every whole token
 * earned, throwing the partial token away. Returns how many calls it would admit after draining.
 */
function admittedWithRefillClockReset(
  limit: number,
  windowMs: number,
  callEveryMs: number,
  untilMs: number,
) {
  const msPerToken = windowMs / limit;
  let tokens = 0;
  let lastRefill = 0;
  let admitted = 0;
  for (let t = callEveryMs; t <= untilMs; t += callEveryMs) {
    const earned = Math.floor((t - lastRefill) / msPerToken);
    if (earned > 0) {
      tokens = Math.min(limit, tokens + earned);
      lastRefill = t;
    }
    if (tokens >= 1) {
      tokens--;
      admitted++;
    }
  }
  return admitted;
}

describe.each(STORES)('with the %s store', (store) => {
  describe.each(RATE_ALGORITHMS)('%s', (algorithm) => {
    describe('a slow rate: FREE tier, 10 per minute, one token every 6 s', () => {
      const HOURS_2 = 2 * 3_600_000;
      const CALL_EVERY = 5_000;
      const MS_PER_TOKEN = 60_000 / 10;

      it('admits a client calling every 5 s once per 6 s over 2 hours, not once per 10 s', async () => {
        const clock = manualClock();
        const limiter = limiterOn(store, {
          tiers: { FREE: { limit: 10, window: '1m', algorithm } },
          clock: clock.now,
        });
        for (let i = 0; i < 10; i++) expect((await limiter.consume('client')).allowed).toBe(true);
        const drained = await limiter.consume('client');
        expect(drained).toMatchObject({ allowed: false, tier: 'FREE', policy: 'free-10-per-1m' });

        const admittedAt: number[] = [];
        for (let elapsed = CALL_EVERY; elapsed <= HOURS_2; elapsed += CALL_EVERY) {
          clock.advance(CALL_EVERY);
          if ((await limiter.consume('client')).allowed) admittedAt.push(elapsed);
        }

        // Token k arrives at 6 s·k; calls come more often than tokens, so each is taken by the
        // first call at or after it, and none is lost.
        const expected = Math.floor(HOURS_2 / MS_PER_TOKEN);
        expect(admittedAt).toHaveLength(expected);
        expect(admittedAt).toEqual(
          Array.from(
            { length: expected },
            (_, i) => Math.ceil(((i + 1) * MS_PER_TOKEN) / CALL_EVERY) * CALL_EVERY,
          ),
        );
        const buggy = admittedWithRefillClockReset(10, 60_000, CALL_EVERY, HOURS_2);
        expect(buggy).toBe(Math.floor(HOURS_2 / 10_000));
        expect(admittedAt.length).toBeGreaterThan(buggy);
      });
    });

    describe('refill', () => {
      it('returns one token every 20 s at 3 per minute, each exactly on time', async () => {
        const clock = manualClock();
        const limiter = limiterOn(store, {
          limit: 3,
          window: '1m',
          algorithm,
          clock: clock.now,
        });
        for (let i = 0; i < 3; i++) await limiter.consume('client');
        const drained = await limiter.consume('client');
        expect(drained).toMatchObject({ allowed: false, retryAfterMs: 20_000, resetMs: 60_000 });
        for (let token = 1; token <= 6; token++) {
          clock.advance(19_999);
          expect(await limiter.consume('client')).toMatchObject({
            allowed: false,
            retryAfterMs: 1,
          });
          clock.advance(1);
          expect(await limiter.consume('client')).toMatchObject({ allowed: true, remaining: 0 });
        }
      });

      it('refills no further than the limit however long the key idles', async () => {
        const clock = manualClock();
        const limiter = limiterOn(store, {
          limit: 3,
          window: '1m',
          algorithm,
          clock: clock.now,
        });
        for (let i = 0; i < 3; i++) await limiter.consume('client');
        clock.advance(30_000);
        // Still in Redis: the key's TTL runs in real time, which has barely moved.
        expect((await limiter.peek('client')).remaining).toBe(1);
        clock.advance(10 * 60_000);
        expect(await limiter.peek('client')).toMatchObject({ remaining: 3, resetMs: 0 });
        for (let i = 2; i >= 0; i--) {
          expect(await limiter.consume('client')).toMatchObject({ allowed: true, remaining: i });
        }
        expect((await limiter.consume('client')).allowed).toBe(false);
      });

      it('returns tokens of a fractional rate (7 per minute) at exactly ceil(60000·k / 7) ms', async () => {
        const clock = manualClock();
        const limiter = limiterOn(store, {
          limit: 7,
          window: '1m',
          algorithm,
          clock: clock.now,
        });
        const start = clock.now();
        for (let i = 0; i < 7; i++) await limiter.consume('client');
        // 100 minutes of tokens, each waited for by exactly the retryAfterMs it was promised.
        for (let k = 1; k <= 700; k++) {
          const refused = await limiter.consume('client');
          expect(refused.allowed).toBe(false);
          const due = start + Math.ceil((60_000 * k) / 7);
          expect(clock.now() + refused.retryAfterMs).toBe(due);
          clock.set(due - 1);
          expect((await limiter.consume('client')).allowed).toBe(false);
          clock.set(due);
          expect((await limiter.consume('client')).allowed).toBe(true);
        }
      });

      it('admits exactly 7·N plus the burst of 7 to a client calling every 100 ms for N minutes', async () => {
        const clock = manualClock();
        const limiter = limiterOn(store, {
          limit: 7,
          window: '1m',
          algorithm,
          clock: clock.now,
        });
        const minutes = 30;
        const end = minutes * 60_000;
        let admitted = 0;
        for (let t = 0; t <= end; t += 100) {
          clock.set(Date.UTC(2026, 0, 1) + t);
          if ((await limiter.consume('client')).allowed) admitted++;
        }
        // The bucket never refills to full while called this often, so by time T it has given
        // the 7 it started with plus every whole token earned: floor(7·T / 60000).
        expect(admitted).toBe(7 + Math.floor((7 * end) / 60_000));
        expect(admitted).toBe(7 * minutes + 7);
      });
    });
  });

  if (store.startsWith('redis')) {
    it('stores the token bucket level with the partial token kept (fixed point: a token is 60000 units, 10 per ms)', async () => {
      const clock = manualClock();
      const prefix = `rates${Math.random().toString(36).slice(2, 10)}`;
      const limiter = limiterOn(store, {
        prefix,
        limit: 10,
        window: '1m',
        algorithm: 'token-bucket',
        clock: clock.now,
      });
      const redis = connect();
      const key = `${prefix}:{client}:10-per-1m:token-bucket`;
      for (let i = 0; i < 10; i++) await limiter.consume('client');
      expect(await redis.get(key)).toBe(`0 ${clock.now() - EPOCH_MS}`);
      // 5 s earns 5/6 of a token: refused, and the 50000 units are carried, not dropped.
      clock.advance(5_000);
      expect((await limiter.consume('client')).allowed).toBe(false);
      expect(await redis.get(key)).toBe(`0 ${clock.now() - 5_000 - EPOCH_MS}`);
      clock.advance(5_000);
      expect((await limiter.consume('client')).allowed).toBe(true);
      expect(await redis.get(key)).toBe(`${10_000 * 10 - 60_000} ${clock.now() - EPOCH_MS}`);
    });
  }
});
