// Quota leases through a limiter: when a key takes one, what its decisions say, how it ends, and
// that a fleet of limiters on one Redis never admits past the limit.

import { beforeEach, describe, expect, it } from 'vitest';
import { uniquePrefix } from '../../../../test/harness/clients.ts';
import { scriptCallsSinceLastLook } from '../../../../test/harness/connection-checks.ts';
import { clientOf, ownServer } from '../../../../test/harness/own-redis.ts';
import type { RedisProcess } from '../../../../test/harness/redis-server.ts';
import { failOnError } from '../../../../test/harness/store-errors.ts';
import {
  ALGORITHMS,
  createHttpLimiter,
  createLimiter,
  type Decision,
  type LimiterOptions,
  MemoryStore,
  type Verdict,
} from '../../src/index.ts';
import { manualClock, onRedis } from '../stores.ts';

let server: RedisProcess;
let scriptCalls: () => Promise<number>;

// A server of each test's own (torn down after it), whose script calls the test counts, with the
// function library loaded by a first call.
beforeEach(async () => {
  server = await ownServer();
  scriptCalls = scriptCallsSinceLastLook([clientOf(server.url)]);
  const warm = createLimiter({ limit: 1, window: '1s', redis: clientOf(server.url) });
  await warm.consume('warm-up');
  await warm.close();
});

type Options = Omit<LimiterOptions, 'redis' | 'store' | 'prefix'>;

/** A limiter on the test's server, on a clock the test steps, sharing `prefix`. */
function onClock(options: Options, prefix = uniquePrefix('quota')) {
  const clock = manualClock();
  const client = clientOf(server.url);
  const limiter = createLimiter({
    onError: failOnError,
    prefix,
    ...options,
    ...onRedis(client, { clock: clock.now }),
  });
  return { limiter, clock, prefix, client };
}

async function consumeMany(consume: () => Promise<Decision>, count: number) {
  const decisions: Decision[] = [];
  for (let i = 0; i < count; i++) decisions.push(await consume());
  return decisions;
}

const HOT = { quotaLeases: { hotAt: 10, duration: '1s', share: 0.5 } } as const;

describe('quota leases', () => {
  it('a cold key decides in Redis; past `hotAt` it takes a lease and spends it locally', async () => {
    const { limiter } = onClock({ limit: 1000, window: '1m', ...HOT });
    await scriptCalls();
    await consumeMany(() => limiter.consume('cold'), 9);
    expect(await scriptCalls()).toBe(9);
    // The tenth asks for a lease of its demand so far, 10 units, beside itself.
    const [taking] = await consumeMany(() => limiter.consume('cold'), 1);
    expect(await scriptCalls()).toBe(1);
    // What is left counts the lease's units, which the fleet still has: 1000 less the 10 decided.
    expect(taking?.remaining).toBe(990);
    const spent = await consumeMany(() => limiter.consume('cold'), 10);
    expect(await scriptCalls()).toBe(0);
    expect(spent.map((d) => d.remaining)).toEqual([
      989, 988, 987, 986, 985, 984, 983, 982, 981, 980,
    ]);
    expect(spent.every((d) => d.allowed && d.degraded === undefined)).toBe(true);
    // Spent: the next goes to Redis, and takes a larger lease of the larger demand.
    await limiter.consume('cold');
    expect(await scriptCalls()).toBeGreaterThanOrEqual(1);
    expect((await limiter.peek('cold')).remaining).toBe(1000 - 21 - 21);
    await limiter.close();
  });

  it('a steady hot key makes a tenth of the Redis calls or fewer', async () => {
    const { limiter, clock } = onClock({ limit: 1_000_000, window: '1h', quotaLeases: true });
    await scriptCalls();
    const decisions = await consumeMany(() => {
      clock.advance(1);
      return limiter.consume('hot');
    }, 5_000);
    expect(decisions.every((d) => d.allowed)).toBe(true);
    expect(await scriptCalls()).toBeLessThan(500);
    await limiter.close();
  });

  it('close() gives back the units a lease did not spend', async () => {
    const { limiter, clock, prefix } = onClock({ limit: 100, window: '1h', ...HOT });
    await consumeMany(() => limiter.consume('k'), 12);
    const plain = createLimiter({
      onError: failOnError,
      prefix,
      limit: 100,
      window: '1h',
      ...onRedis(clientOf(server.url), { clock: clock.now }),
    });
    // 9 decided in Redis; the tenth took a lease of 10 beside itself, and 2 of those are spent.
    expect((await plain.peek('k')).remaining).toBe(80);
    await limiter.close();
    expect((await plain.peek('k')).remaining).toBe(88);
    await plain.close();
  });

  it('a lease nobody spends to its end is given back before it ends, on Redis time', async () => {
    const prefix = uniquePrefix('quota-idle');
    const options = { onError: failOnError, prefix, limit: 1000, window: '1h' } as const;
    const limiter = createLimiter({
      ...options,
      quotaLeases: { hotAt: 10, duration: '300ms' },
      redis: clientOf(server.url),
    });
    const plain = createLimiter({ ...options, redis: clientOf(server.url) });
    await consumeMany(() => limiter.consume('k'), 12);
    // The tenth took a lease of 10, of which 2 are spent: Redis counts all 10 until it ends.
    expect((await plain.peek('k')).remaining).toBe(980);
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect((await plain.peek('k')).remaining).toBe(988);
    await limiter.close();
    await plain.close();
  });

  it('a lease is spent only until its end, and then the store decides again', async () => {
    const { limiter, clock } = onClock({ limit: 1000, window: '1h', ...HOT });
    await consumeMany(() => limiter.consume('k'), 10);
    await scriptCalls();
    await limiter.consume('k');
    clock.advance(990);
    await limiter.consume('k');
    expect(await scriptCalls()).toBe(0);
    // Past the end less the margin: back to Redis.
    clock.advance(9);
    await limiter.consume('k');
    expect(await scriptCalls()).toBeGreaterThanOrEqual(1);
    await limiter.close();
  });

  it('while Redis is down a lease is spent until its end, never longer; then the failure mode answers', async () => {
    const own = await ownServer();
    const clock = manualClock();
    const limiter = createLimiter({
      limit: 1000,
      window: '1h',
      ...HOT,
      prefix: uniquePrefix('quota-down'),
      onStoreError: 'deny',
      onError: () => {},
      breaker: false,
      ...onRedis(clientOf(own.url, { maxRetriesPerRequest: 0, enableOfflineQueue: false }), {
        clock: clock.now,
      }),
    });
    await consumeMany(() => limiter.consume('k'), 11);
    await own.stop();
    clock.advance(500);
    const during = await consumeMany(() => limiter.consume('k'), 5);
    expect(during.every((d) => d.allowed && d.degraded === undefined)).toBe(true);
    clock.advance(500);
    const after = await limiter.consume('k');
    expect(after.allowed).toBe(false);
    expect(after.degraded).toBe('deny');
    await limiter.close();
  });

  it('a refund of a decision spent from a lease gives the unit back to the lease', async () => {
    const { limiter } = onClock({ limit: 1000, window: '1h', ...HOT });
    await consumeMany(() => limiter.consume('k'), 11);
    const spent = await limiter.consume('k');
    expect(spent.remaining).toBe(988);
    expect(await limiter.refund('k', { decision: spent })).toBe(true);
    expect(await limiter.refund('k', { decision: spent })).toBe(false);
    expect((await limiter.consume('k')).remaining).toBe(988);
    await expect(limiter.refund('other', { decision: spent })).rejects.toThrow(TypeError);
    await limiter.close();
  });

  it('every 429 says nothing is left, and no admitted decision shows more than the fleet had at its last sync', async () => {
    const prefix = uniquePrefix('quota-honest');
    const clock = manualClock();
    let admitted = 0;
    const fleet = [0, 1].map(() => {
      // The fleet's admissions when this limiter last heard from Redis, and its own since.
      const sync = { admitted: 0, spentSince: 0 };
      return createLimiter({
        onError: failOnError,
        prefix,
        limit: 60,
        window: '1h',
        ...HOT,
        ...onRedis(clientOf(server.url), { clock: clock.now }),
        observe: {
          decision({ decision, storeMs }) {
            if (!decision.allowed) {
              expect(decision.remaining).toBe(0);
              expect(decision.retryAfterMs).toBeGreaterThan(0);
              return;
            }
            admitted++;
            if (storeMs !== undefined) {
              sync.admitted = admitted;
              sync.spentSince = 0;
              expect(decision.remaining).toBeLessThanOrEqual(60 - admitted);
            } else {
              sync.spentSince++;
              expect(decision.remaining).toBeLessThanOrEqual(60 - sync.admitted - sync.spentSince);
            }
          },
        },
      });
    });
    for (let i = 0; i < 60; i++) {
      for (const limiter of fleet) await limiter.consume('k');
    }
    expect(admitted).toBeLessThanOrEqual(60);
    // The leases were spent: the budget was used to the last unit.
    expect(admitted).toBeGreaterThanOrEqual(56);
    await Promise.all(fleet.map((limiter) => limiter.close()));
  });

  it("over HTTP, a request a lease can answer gets its verdict at once, with the lease's count", async () => {
    const clock = manualClock();
    const http = createHttpLimiter({
      onError: failOnError,
      prefix: uniquePrefix('quota-http'),
      limit: 1000,
      window: '1m',
      ...HOT,
      identify: () => ({ key: 'hot' }),
      ...onRedis(clientOf(server.url), { clock: clock.now }),
    });
    const request = { headers: {}, socket: { remoteAddress: '127.0.0.1' } };
    // Cold, then taking its lease: each verdict waits for Redis.
    const waited = [];
    for (let i = 0; i < 10; i++) {
      const checked = http.check(request);
      waited.push(checked instanceof Promise);
      await checked;
    }
    expect(waited.every(Boolean)).toBe(true);
    await scriptCalls();
    const spent = [];
    for (let i = 0; i < 10; i++) spent.push(http.check(request));
    expect(await scriptCalls()).toBe(0);
    expect(spent.some((checked) => checked instanceof Promise)).toBe(false);
    const verdicts = spent as Verdict[];
    expect(verdicts.map((v) => v.action)).toEqual(Array(10).fill('next'));
    expect(verdicts.map((v) => v.decision?.remaining)).toEqual([
      989, 988, 987, 986, 985, 984, 983, 982, 981, 980,
    ]);
    expect(verdicts[9]?.headers.RateLimit).toBe('"1000-per-1m";r=980;t=2');
    await http.close();
  });

  it('with the memory store the option does nothing', async () => {
    const clock = manualClock();
    const store = new MemoryStore({ clock: clock.now });
    const limiter = createLimiter({ store, limit: 20, window: '1h', ...HOT });
    const decisions = await consumeMany(() => limiter.consume('k'), 25);
    expect(decisions.filter((d) => d.allowed)).toHaveLength(20);
    expect(decisions.map((d) => d.remaining).slice(0, 20)).toEqual(
      Array.from({ length: 20 }, (_, i) => 19 - i),
    );
    await limiter.close();
  });

  it('a bad quotaLeases throws a TypeError naming the field', () => {
    const base = { limit: 1, window: '1s' } as const;
    const bad: [unknown, string][] = [
      ['yes', '`quotaLeases`'],
      [{ duration: 'soon' }, '`quotaLeases.duration`'],
      [{ hotAt: 0 }, '`quotaLeases.hotAt`'],
      [{ share: 1.5 }, '`quotaLeases.share`'],
      [{ share: 0 }, '`quotaLeases.share`'],
      [{ lease: '1s' }, 'quotaLeases.lease'],
    ];
    for (const [value, named] of bad) {
      expect(() => createLimiter({ ...base, quotaLeases: value as never })).toThrow(TypeError);
      expect(() => createLimiter({ ...base, quotaLeases: value as never })).toThrow(named);
    }
  });

  describe('a fleet of four limiters on one key, on Redis time', () => {
    for (const algorithm of ALGORITHMS) {
      it(`${algorithm}: never admits past the limit, and loses nothing once the leases end`, async () => {
        const prefix = uniquePrefix(`quota-fleet-${algorithm}`);
        const options = {
          limit: 300,
          window: '1h',
          algorithm,
          prefix,
          onError: failOnError,
        } as const;
        const fleet = Array.from({ length: 4 }, () =>
          createLimiter({ ...options, quotaLeases: { hotAt: 8 }, redis: clientOf(server.url) }),
        );
        let admitted = 0;
        // Skewed: the first limiter gets half of each wave.
        for (let wave = 0; wave < 30; wave++) {
          const calls = Array.from({ length: 24 }, (_, i) =>
            (fleet[i < 12 ? 0 : 1 + (i % 3)] as (typeof fleet)[number]).consume('hot'),
          );
          for (const decision of await Promise.all(calls)) if (decision.allowed) admitted++;
          expect(admitted).toBeLessThanOrEqual(300);
        }
        await Promise.all(fleet.map((limiter) => limiter.close()));
        // What the leases held and did not spend is back: the rest of the budget is there.
        const plain = createLimiter({ ...options, redis: clientOf(server.url) });
        const rest = await Promise.all(Array.from({ length: 400 }, () => plain.consume('hot')));
        const after = rest.filter((d) => d.allowed).length;
        // The token bucket and GCRA refill 300 an hour: a few may have come back meanwhile.
        const refilled = algorithm === 'token-bucket' || algorithm === 'gcra' ? 3 : 0;
        expect(admitted + after).toBeGreaterThanOrEqual(300);
        expect(admitted + after).toBeLessThanOrEqual(300 + refilled);
        await plain.close();
      });
    }
  });
});
