// Concurrency: 1000 simultaneous requests over 8 connections admit exactly the limit, warm or cold.

import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { naiveTokenBucket } from '../../../../examples/race-demo/naive-limiter.ts';
import { connect, uniquePrefix } from '../../../../test/harness/clients.ts';
import { besideCpuHog } from '../../../../test/harness/cpu-hog.ts';
import { clientOf, ownServer } from '../../../../test/harness/own-redis.ts';
import { failOnError } from '../../../../test/harness/store-errors.ts';
import {
  ALGORITHMS,
  type Algorithm,
  createLimiter,
  type Decision,
  type LimiterOptions,
} from '../../src/index.ts';
import { onRedis } from '../stores.ts';

const CONNECTIONS = 8;
/**
 * The options a user gets by default, 50 ms deadline included: a burst must be counted, not
 * waved through. Any store error fails the test instead of degrading quietly.
 */
const STRICT = { onError: failOnError };
const REQUESTS = 1000;
const LIMIT = 100;

function tally(decisions: readonly Decision[]) {
  return {
    admitted: decisions.filter((d) => d.allowed).length,
    degraded: decisions.filter((d) => d.degraded !== undefined).length,
  };
}

/**
 * Fires REQUESTS consumes for one key at once, spread round-robin over a limiter per client;
 * `clock`, if given, is the one the scripts run on instead of Redis's.
 */
async function race(
  {
    clock,
    ...options
  }: Omit<LimiterOptions, 'redis' | 'store' | 'prefix'> & {
    clock?: () => number;
  },
  clients: readonly Redis[] = Array.from({ length: CONNECTIONS }, () => connect()),
) {
  const prefix = uniquePrefix('race');
  const limiters = clients.map((client) =>
    createLimiter({ ...options, ...STRICT, prefix, ...onRedis(client, { clock }) }),
  );
  const decisions = await Promise.all(
    Array.from({ length: REQUESTS }, (_, i) =>
      (limiters[i % limiters.length] as (typeof limiters)[number]).consume('tenant'),
    ),
  );
  await Promise.all(limiters.map((limiter) => limiter.close()));
  return tally(decisions);
}

const LOADS = {
  'on an idle machine': <T>(test: () => Promise<T>) => test(),
  'beside a CPU hog': besideCpuHog,
};

describe.each(Object.entries(LOADS))('from a cold start %s', (_, load) => {
  // A fresh redis-server has no scripts loaded; the clients connect as the burst is fired.
  async function coldClients(count: number): Promise<Redis[]> {
    const server = await ownServer();
    return Array.from({ length: count }, () => clientOf(server.url));
  }

  it.each(ALGORITHMS)(
    'admits exactly 100 of 1000 concurrent calls over 8 new clients with %s, none degraded',
    (algorithm) =>
      load(async () => {
        const clients = await coldClients(CONNECTIONS);
        const result = await race({ limit: LIMIT, window: '1h', algorithm }, clients);
        expect(result).toEqual({ admitted: LIMIT, degraded: 0 });
      }),
  );

  it('decides 20,000 calls over one new client with 256 in flight, exactly, none degraded', () =>
    load(async () => {
      const [client] = await coldClients(1);
      // 200 identities at 50 a day: exactly 50 of each one's 100 calls are admitted.
      const limiter = createLimiter({
        ...STRICT,
        redis: client as Redis,
        prefix: uniquePrefix('in-flight'),
        limit: 50,
        window: '1d',
      });
      const decisions: Decision[] = [];
      let next = 0;
      await Promise.all(
        Array.from({ length: 256 }, async () => {
          while (next < 20_000) {
            const identity = `tenant-${next++ % 200}`;
            decisions.push(await limiter.consume(identity));
          }
        }),
      );
      await limiter.close();
      expect(tally(decisions)).toEqual({ admitted: 200 * 50, degraded: 0 });
    }));
});

describe('1000 concurrent requests over 8 warm connections at limit 100', () => {
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

  // The sliding-window log writes its own entries, so a call that has it looks, then consumes;
  // policies of the other algorithms decide in one pass, their writes held until all admit.
  it.each([
    ['sliding-window-log', 'looked at, then consumed'],
    ['token-bucket', 'held back until all admit'],
  ] as const)(
    'admit exactly the tightest limit when two policies apply, consuming from neither past it: %s and gcra, writes %s',
    async (algorithm, _writes) => {
      const prefix = uniquePrefix('race');
      const policies = [
        { name: 'hourly', limit: 100, window: '1h' as const, algorithm },
        { name: 'burst', limit: 60, window: '1h' as const, algorithm: 'gcra' as const },
      ];
      const limiters = Array.from({ length: CONNECTIONS }, () =>
        createLimiter({ policies, ...STRICT, prefix, redis: connect() }),
      );
      const decisions = await Promise.all(
        Array.from({ length: REQUESTS }, (_, i) =>
          (limiters[i % CONNECTIONS] as (typeof limiters)[number]).consume('tenant'),
        ),
      );
      expect(tally(decisions)).toEqual({ admitted: 60, degraded: 0 });
      const after = await (limiters[0] as (typeof limiters)[number]).peek('tenant');
      expect(after.policies.map((p) => [p.policy, p.remaining])).toEqual([
        ['hourly', 40],
        ['burst', 0],
      ]);
      await Promise.all(limiters.map((limiter) => limiter.close()));
    },
  );

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
