// lua/throttler.lua and its memory twin: the same records for the same increments, blocks and expiry on a stepped clock.
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { connect, uniquePrefix } from '../../../../test/harness/clients.ts';
import type { ThrottlerInput, ThrottlerRecord } from '../../src/algorithms/throttler.ts';
import { RedisStore } from '../../src/index.ts';
import { MemoryThrottler } from '../../src/stores/memory/memory-throttler.ts';
import { decodeThrottlerReply, RedisThrottler } from '../../src/stores/redis/redis-throttler.ts';
import { runScriptsOn } from '../../src/stores/redis/script-clock.ts';
import { library, scripts } from '../../src/stores/redis/scripts.generated.ts';
import { type Clock, manualClock } from '../stores.ts';
import { CONFIGS, increment, TTLS } from './throttler-sequences.ts';

const STORES = ['memory', 'redis (ioredis 6)', 'redis (ioredis 5)'] as const;
type Input = Omit<ThrottlerInput, 'now'>;

interface Throttler {
  increment(key: string, name: string, input: Input): ThrottlerRecord | Promise<ThrottlerRecord>;
  close(): void;
}

const opened: Throttler[] = [];
afterEach(() => {
  for (const throttler of opened.splice(0)) throttler.close();
});

/**
 * A throttler of the named kind on `clock`; on Redis, under a prefix of its own, through `client`
 * or a new client of the named library.
 */
function throttlerOn(
  name: (typeof STORES)[number],
  clock: Clock,
  client = name === 'memory'
    ? undefined
    : connect(name === 'redis (ioredis 6)' ? 'ioredis 6' : 'ioredis 5'),
): Throttler {
  const throttler =
    client === undefined
      ? new MemoryThrottler({ clock: clock.now })
      : new RedisThrottler(
          runScriptsOn(new RedisStore({ client, timeout: 2_000 }), clock.now),
          uniquePrefix('throttler'),
        );
  opened.push(throttler);
  return throttler;
}

/** A record as a tuple, to compare sequences at a glance: totalHits, timeToExpire, isBlocked, timeToBlockExpire. */
function tuple(record: ThrottlerRecord): [number, number, boolean, number] {
  return [record.totalHits, record.timeToExpire, record.isBlocked, record.timeToBlockExpire];
}

describe.each(STORES)('the throttler on %s', (store) => {
  it('blocks the hit past the limit for blockDuration, counting none while blocked', async () => {
    const clock = manualClock();
    const throttler = throttlerOn(store, clock);
    const input = { ttl: 10_000, limit: 3, blockDuration: 30_000 };
    const seen = [];
    for (let i = 0; i < 5; i++) seen.push(tuple(await throttler.increment('k', 'default', input)));
    expect(seen).toEqual([
      [1, 10, false, 0],
      [2, 10, false, 0],
      [3, 10, false, 0],
      [4, 10, true, 30],
      [4, 10, true, 30],
    ]);
    // The hits stop counting and the window starts again; the block goes on.
    clock.advance(12_000);
    expect(tuple(await throttler.increment('k', 'default', input))).toEqual([0, 10, true, 18]);
    // The block is over: this hit starts the count afresh.
    clock.advance(18_000);
    expect(tuple(await throttler.increment('k', 'default', input))).toEqual([1, 10, false, 0]);
    expect(tuple(await throttler.increment('k', 'default', input))).toEqual([2, 10, false, 0]);
  });

  it('without a block, refuses while limit hits count, until the oldest stops counting', async () => {
    const clock = manualClock();
    const throttler = throttlerOn(store, clock);
    const input = { ttl: 10_000, limit: 2, blockDuration: 0 };
    const at = async (ms: number) => {
      clock.set(Date.UTC(2026, 0, 1) + ms);
      return tuple(await throttler.increment('k', 'default', input));
    };
    expect(await at(0)).toEqual([1, 10, false, 0]);
    expect(await at(1_000)).toEqual([2, 9, false, 0]);
    // Refused and not counted: totalHits says limit + 1; the oldest hit counts 8 s more.
    expect(await at(2_000)).toEqual([3, 8, true, 8]);
    expect(await at(2_500)).toEqual([3, 8, true, 8]);
    // The first hit has stopped counting; the window starts again.
    expect(await at(10_500)).toEqual([2, 10, false, 0]);
    expect(await at(10_600)).toEqual([3, 10, true, 1]);
  });

  it("counts each throttler's hits apart under one key, which one block holds", async () => {
    const clock = manualClock();
    const throttler = throttlerOn(store, clock);
    const short = { ttl: 1_000, limit: 1, blockDuration: 5_000 };
    const long = { ttl: 60_000, limit: 5, blockDuration: 60_000 };
    expect(tuple(await throttler.increment('k', 'long', long))).toEqual([1, 60, false, 0]);
    expect(tuple(await throttler.increment('k', 'short', short))).toEqual([1, 60, false, 0]);
    expect(tuple(await throttler.increment('other', 'short', short))).toEqual([1, 1, false, 0]);
    // The key's block, as ThrottlerStorageService keeps one per key, holds its other throttler too.
    expect(tuple(await throttler.increment('k', 'short', short))).toEqual([2, 60, true, 5]);
    expect(tuple(await throttler.increment('k', 'long', long))).toEqual([1, 60, true, 5]);
    clock.advance(5_000);
    expect(tuple(await throttler.increment('k', 'long', long))).toEqual([1, 55, false, 0]);
  });

  it('lets a hit stop counting ttl ms after it came', async () => {
    const clock = manualClock();
    const throttler = throttlerOn(store, clock);
    const input = { ttl: 1_000, limit: 1, blockDuration: 0 };
    expect(tuple(await throttler.increment('k', 'default', input))).toEqual([1, 1, false, 0]);
    expect(tuple(await throttler.increment('k', 'default', input))).toEqual([2, 1, true, 1]);
    clock.advance(1_000);
    expect(tuple(await throttler.increment('k', 'default', input))).toEqual([1, 1, false, 0]);
  });
});

describe('the throttler script on Redis', () => {
  it('lets its keys expire when the last of the window, the block and the hits ends', async () => {
    const redis = connect();
    const prefix = uniquePrefix('throttler');
    const throttler = new RedisThrottler(new RedisStore({ client: redis, timeout: 2_000 }), prefix);
    opened.push(throttler);
    const [record, hits] = throttler.keysOf('k', 'default');
    const input = { ttl: 2_000, limit: 1, blockDuration: 20_000 };
    await throttler.increment('k', 'default', input);
    expect(await redis.pttl(record)).toBeGreaterThan(1_000);
    expect(await redis.pttl(record)).toBeLessThanOrEqual(2_001);
    expect(await redis.pttl(hits)).toBeLessThanOrEqual(2_001);
    // Blocked: both keys stay for the block.
    expect((await throttler.increment('k', 'default', input)).isBlocked).toBe(true);
    expect(await redis.pttl(record)).toBeGreaterThan(19_000);
    expect(await redis.pttl(hits)).toBeGreaterThan(19_000);
    expect(await redis.pttl(record)).toBeLessThanOrEqual(20_001);
  });

  it('does nothing, and answers with its clock alone, once the Redis clock is past the expiry', async () => {
    const redis = connect();
    const prefix = uniquePrefix('throttler');
    const keys = [`${prefix}:throttler:{k}`, `${prefix}:throttler:{k}:default`];
    const expiry = String(Date.now() - 60_000);
    const args = ['', expiry, '1000', '5', '0'];
    const reply = (await redis.eval(scripts.throttler.source, 2, ...keys, ...args)) as number[];
    expect(reply).toHaveLength(1);
    expect(await redis.exists(...keys)).toBe(0);
  });

  it('answers whole numbers, then the Redis clock, the same by FCALL as by EVALSHA', async () => {
    const redis = connect();
    expect(await redis.call('FUNCTION', 'LOAD', 'REPLACE', library.source)).toBe(library.name);
    await redis.script('LOAD', scripts.throttler.source);
    const [byScript, byFunction] = [uniquePrefix(), uniquePrefix()];
    const keysOf = (prefix: string) => [`${prefix}:throttler:{k}`, `${prefix}:throttler:{k}:a`];
    const args = [String(Date.now()), '', '1500', '2', '4000'];
    for (let i = 0; i < 4; i++) {
      const script = (await redis.evalsha(
        scripts.throttler.sha1,
        2,
        ...keysOf(byScript),
        ...args,
      )) as number[];
      const fn = (await redis.fcall(
        scripts.throttler.function,
        2,
        ...keysOf(byFunction),
        ...args,
      )) as number[];
      expect(script).toHaveLength(5);
      for (const value of script) expect(Number.isInteger(value)).toBe(true);
      expect(fn.slice(0, -1)).toEqual(script.slice(0, -1));
      expect(decodeThrottlerReply(script.slice(0, -1)).totalHits).toBe(Math.min(i + 1, 3));
    }
    expect(await redis.hgetall(keysOf(byFunction)[0] as string)).toEqual(
      await redis.hgetall(keysOf(byScript)[0] as string),
    );
  });
});

describe('the script and its memory twin', () => {
  it('give the same record for every increment of random sequences', async () => {
    const client = connect();
    await fc.assert(
      fc.asyncProperty(fc.array(increment, { minLength: 1, maxLength: 40 }), async (ops) => {
        const clock = manualClock(Date.UTC(2026, 0, 1) + 123);
        const memory = throttlerOn('memory', clock);
        const redis = throttlerOn('redis (ioredis 6)', clock, client);
        try {
          for (const { key, name, step } of ops) {
            clock.advance(step);
            const input = { ...(CONFIGS[key] as (typeof CONFIGS)[number]), ttl: TTLS[name] };
            const expected = memory.increment(`k${key}`, name, input);
            expect(await redis.increment(`k${key}`, name, input)).toEqual(expected);
          }
        } finally {
          // Each run's store lets go of the client's listeners at once, not after the test.
          for (const throttler of opened.splice(0)) throttler.close();
        }
      }),
      { numRuns: Number(process.env.PARITY_RUNS ?? 60) },
    );
  });
});
