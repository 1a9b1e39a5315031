// Concurrency: 1000 simultaneous requests over 8 connections admit exactly the limit.
import { describe, expect, it } from 'vitest';
import { connect, uniquePrefix } from '../../../test/harness/clients.ts';
import { naiveTokenBucket } from '../../../test/harness/naive-limiter.ts';
import { ALGORITHMS, type Algorithm, createLimiter, type LimiterOptions } from '../src/index.ts';

const CONNECTIONS = 8;
/**
 * Atomicity is what these tests measure, so a deadline must not decide them on a loaded
 * machine: Redis gets 10 s and any store failure fails the test. The default deadline under a
 * cold-start burst has its own suite (test/failure-burst.test.ts).
 */
const STEADY = {
  timeout: 10_000,
  onError: (error: Error) => {
    throw error;
  },
};
const REQUESTS = 1000;
const LIMIT = 100;

/** Fires REQUESTS consumes for one key at once, spread round-robin over CONNECTIONS limiters. */
async function race(options: Omit<LimiterOptions, 'redis' | 'store' | 'prefix'>) {
  const prefix = uniquePrefix('race');
  const limiters = Array.from({ length: CONNECTIONS }, () =>
    createLimiter({ ...options, ...STEADY, prefix, redis: connect() }),
  );
  const decisions = await Promise.all(
    Array.from({ length: REQUESTS }, (_, i) =>
      (limiters[i % CONNECTIONS] as (typeof limiters)[number]).consume('tenant'),
    ),
  );
  await Promise.all(limiters.map((limiter) => limiter.close()));
  return {
    admitted: decisions.filter((d) => d.allowed).length,
    degraded: decisions.filter((d) => d.degraded !== undefined).length,
  };
}

describe('1000 concurrent requests over 8 connections at limit 100', () => {
  // A frozen clock makes window boundaries irrelevant; the race itself is real.
  const frozen = Date.UTC(2026, 5, 15, 12, 30);

  it.each(ALGORITHMS)('admit exactly 100 with %s', async (algorithm: Algorithm) => {
    const result = await race({ limit: LIMIT, window: '1h', algorithm, clock: () => frozen });
    expect(result).toEqual({ admitted: LIMIT, degraded: 0 });
  });

  it.each(['token-bucket', 'gcra', 'sliding-window-log'] as const)(
    'admit exactly 100 with %s on the Redis clock',
    async (algorithm) => {
      // One token per 36 s: none can refill while the race runs.
      const result = await race({ limit: LIMIT, window: '1h', algorithm });
      expect(result).toEqual({ admitted: LIMIT, degraded: 0 });
    },
  );

  it('admit exactly the tightest limit when two policies apply, consuming from neither past it', async () => {
    const prefix = uniquePrefix('race');
    const policies = [
      {
        name: 'hourly',
        limit: 100,
        window: '1h' as const,
        algorithm: 'sliding-window-log' as const,
      },
      { name: 'burst', limit: 60, window: '1h' as const, algorithm: 'gcra' as const },
    ];
    const limiters = Array.from({ length: CONNECTIONS }, () =>
      createLimiter({ policies, ...STEADY, prefix, redis: connect() }),
    );
    const decisions = await Promise.all(
      Array.from({ length: REQUESTS }, (_, i) =>
        (limiters[i % CONNECTIONS] as (typeof limiters)[number]).consume('tenant'),
      ),
    );
    expect(decisions.filter((d) => d.allowed)).toHaveLength(60);
    const after = await (limiters[0] as (typeof limiters)[number]).peek('tenant');
    expect(after.policies.map((p) => [p.policy, p.remaining])).toEqual([
      ['hourly', 40],
      ['burst', 0],
    ]);
    await Promise.all(limiters.map((limiter) => limiter.close()));
  });

  it('let a read-decide-write limiter overshoot, which shows the race is real', async () => {
    const key = `${uniquePrefix('naive')}:tenant`;
    const limiters = Array.from({ length: CONNECTIONS }, () =>
      naiveTokenBucket(connect(), LIMIT, 3_600_000),
    );
    const admitted = await Promise.all(
      Array.from({ length: REQUESTS }, (_, i) =>
        (limiters[i % CONNECTIONS] as (typeof limiters)[number])(key),
      ),
    );
    expect(admitted.filter(Boolean).length).toBeGreaterThan(LIMIT);
  });
});
