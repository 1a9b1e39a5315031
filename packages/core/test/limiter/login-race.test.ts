// Concurrency for login protection, on a real Redis with the options a user gets by default:
// a burst of failed logins meets an exact limit and then the box, and refunds racing consumes
// never take a policy past its limit or below zero.
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { connect, uniquePrefix } from '../../../../test/harness/clients.ts';
import { besideCpuHog } from '../../../../test/harness/cpu-hog.ts';
import { failOnError } from '../../../../test/harness/store-errors.ts';
import { ALGORITHMS, createLimiter, type Decision } from '../../src/index.ts';

const LOADS = {
  'on an idle machine': <T>(test: () => Promise<T>) => test(),
  'beside a CPU hog': besideCpuHog,
};
const FIFTEEN_MINUTES = 15 * 60_000;

describe.each(Object.entries(LOADS))('%s', (_, load) => {
  it.each(ALGORITHMS)(
    'admits exactly 5 of 200 concurrent logins with %s, then holds the identity in the box',
    (algorithm) =>
      load(async () => {
        const limiter = createLimiter({
          redis: connect(),
          prefix: uniquePrefix('login-race'),
          policies: { name: 'login', limit: 5, window: '15m', algorithm, blockFor: '15m' },
          onError: failOnError,
        });
        const decisions = await Promise.all(
          Array.from({ length: 200 }, () => limiter.consume('alice@203.0.113.9')),
        );
        expect(decisions.filter((d) => d.allowed)).toHaveLength(5);
        expect(decisions.filter((d) => d.degraded !== undefined)).toHaveLength(0);
        // Every refusal waits out the box, about 15 minutes, or longer where the algorithm's own
        // wait is longer: a sliding window counter's may reach two windows.
        const refused = decisions.filter((d) => !d.allowed);
        for (const decision of refused) {
          expect(decision.retryAfterMs).toBeGreaterThan(FIFTEEN_MINUTES - 60_000);
          expect(decision.retryAfterMs).toBeLessThanOrEqual(2 * FIFTEEN_MINUTES);
        }
        const later = await limiter.consume('alice@203.0.113.9');
        expect(later.allowed).toBe(false);
        expect(later.retryAfterMs).toBeGreaterThan(FIFTEEN_MINUTES - 60_000);
        await limiter.close();
      }),
  );

  it.each(ALGORITHMS)(
    'never takes %s past its limit or below zero while refunds race consumes',
    (algorithm) =>
      load(async () => {
        const LIMIT = 20;
        // A day's window: nothing refills or rolls over within the test.
        const limiter = createLimiter({
          redis: connect(),
          prefix: uniquePrefix('refund-race'),
          policies: { limit: LIMIT, window: '1d', algorithm },
          onError: failOnError,
        });
        let refunded = 0;
        const seen: Decision[] = [];
        // 300 consumes in waves of 10, a millisecond apart; every other admitted one is refunded
        // as soon as it is known, while later waves are in flight.
        const calls: Promise<void>[] = [];
        for (let i = 0; i < 300; i++) {
          calls.push(
            (async () => {
              const decision = await limiter.consume('tenant');
              seen.push(decision);
              if (decision.allowed && i % 2 === 0) {
                if (await limiter.refund('tenant', { decision })) refunded++;
              }
            })(),
          );
          if (i % 10 === 9) await sleep(1);
        }
        await Promise.all(calls);
        const admitted = seen.filter((d) => d.allowed).length;
        expect(seen.filter((d) => d.degraded !== undefined)).toHaveLength(0);
        expect(admitted - refunded).toBeLessThanOrEqual(LIMIT);
        expect(admitted).toBeGreaterThan(LIMIT);
        for (const decision of seen) {
          expect(decision.remaining).toBeGreaterThanOrEqual(0);
          expect(decision.remaining).toBeLessThanOrEqual(LIMIT);
        }
        // What is left is exactly what was not given back.
        expect((await limiter.peek('tenant')).remaining).toBe(LIMIT - (admitted - refunded));
        await limiter.close();
      }),
  );
});
