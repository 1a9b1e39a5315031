// Stored state per algorithm: Redis encodings and TTLs (time until full), idle keys vanishing, memory key lifetimes.
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { connect, uniquePrefix } from '../../../../test/harness/clients.ts';
import {
  clientOf,
  monitorOnceReady,
  owned,
  ownServer,
  waitFor,
} from '../../../../test/harness/own-redis.ts';
import {
  ALGORITHMS,
  type Algorithm,
  createLimiter,
  MemoryStore,
  type Window,
} from '../../src/index.ts';
import { EPOCH_MS } from '../../src/shared/lua-constants.generated.ts';
import { limiterOn, manualClock, onRedis, STORES } from '../stores.ts';

const REDIS_STORES = STORES.filter((store) => store.startsWith('redis'));

/** Real time a PTTL read may lag the script that set it: one round trip on a busy machine. */
const PTTL_SLACK_MS = 500;

/** A key's TTL as a write sets it: its reset and a ms more (EXPIRY_MARGIN_MS, lua/prelude/state.lua). */
const keyTtl = (resetMs: number) => resetMs + 1;

describe.each(REDIS_STORES)('with the %s store', (store) => {
  const redis = connect();

  function setup(algorithm: Algorithm, limit: number, window: Window) {
    const clock = manualClock();
    const prefix = uniquePrefix('state');
    const limiter = limiterOn(store, { prefix, limit, window, algorithm, clock: clock.now });
    const keyOf = (policy: string) => `${prefix}:{client}:${policy}:${algorithm}`;
    return { clock, limiter, keyOf };
  }

  describe.each(ALGORITHMS)('%s', (algorithm) => {
    it('sets the key to expire when the policy is full again: PTTL ≈ resetMs', async () => {
      const { clock, limiter, keyOf } = setup(algorithm, 5, '1m');
      const key = keyOf('5-per-1m');
      clock.advance(12_345);
      for (const [advance, cost] of [
        [0, 2],
        [20_000, 1],
        [1_500, 2],
      ] as const) {
        clock.advance(advance);
        const decision = await limiter.consume('client', { cost });
        expect(decision.allowed).toBe(true);
        const expiresIn = keyTtl(decision.resetMs);
        const ttl = await redis.pttl(key);
        expect(ttl).toBeLessThanOrEqual(expiresIn);
        expect(ttl).toBeGreaterThan(expiresIn - PTTL_SLACK_MS);
      }
    });

    it('lets an idle key vanish once its resetMs has passed', async () => {
      const { limiter, keyOf } = setup(algorithm, 3, '200ms');
      const key = keyOf('3-per-200ms');
      const { resetMs } = await limiter.consume('client');
      expect(resetMs).toBeGreaterThan(0);
      expect(await redis.exists(key)).toBe(1);
      // TTLs run in real time even under an injected clock.
      await sleep(resetMs + 100);
      expect(await redis.exists(key)).toBe(0);
    });

    it('writes nothing for a peek, a refusal of a fresh key, or a cost above the limit', async () => {
      const { limiter, keyOf } = setup(algorithm, 3, '1m');
      const key = keyOf('3-per-1m');
      await limiter.peek('client');
      await limiter.peek('client', { cost: 3 });
      await limiter.consume('client', { cost: 4 });
      expect(await redis.exists(key)).toBe(0);
    });

    it('deletes the key on reset', async () => {
      const { limiter, keyOf } = setup(algorithm, 3, '1m');
      await limiter.consume('client');
      expect(await redis.exists(keyOf('3-per-1m'))).toBe(1);
      await limiter.reset('client');
      expect(await redis.exists(keyOf('3-per-1m'))).toBe(0);
    });
  });

  describe('the documented state encodings', () => {
    // Limit 7 so that GCRA's fraction is not zero; 12.345 s into a window for the window ones.
    async function consumeTwo(algorithm: Algorithm) {
      const { clock, limiter, keyOf } = setup(algorithm, 7, '1m');
      clock.advance(12_345);
      await limiter.consume('client', { cost: 2 });
      return { key: keyOf('7-per-1m'), now: clock.now() - EPOCH_MS, unix: clock.now() };
    }

    it('token-bucket: "<level> <updated_at>", a token being 60000 units', async () => {
      const { key, now } = await consumeTwo('token-bucket');
      expect(await redis.get(key)).toBe(`${7 * 60_000 - 2 * 60_000} ${now}`);
    });

    it('gcra: "<tat_ms> <fraction>", the TAT two emission intervals (2 · 60000 / 7 ms) ahead', async () => {
      const { key, now } = await consumeTwo('gcra');
      expect(await redis.get(key)).toBe(
        `${now + Math.floor((2 * 60_000) / 7)} ${(2 * 60_000) % 7}`,
      );
    });

    it('fixed-window: "<window index> <count>"', async () => {
      const { key, unix } = await consumeTwo('fixed-window');
      expect(await redis.get(key)).toBe(`${Math.floor(unix / 60_000)} 2`);
    });

    it('sliding-window-counter: "<window index> <current> <previous>"', async () => {
      const { key, unix } = await consumeTwo('sliding-window-counter');
      expect(await redis.get(key)).toBe(`${Math.floor(unix / 60_000)} 2 0`);
    });

    it('sliding-window-log: a sorted set scored by time, one "<time>:<seq>" member per unit', async () => {
      const { key, now } = await consumeTwo('sliding-window-log');
      expect(await redis.zrange(key, '0', '-1', 'WITHSCORES')).toEqual([
        `${now}:1`,
        `${now}`,
        `${now}:2`,
        `${now}`,
      ]);
    });
  });
});

// A window's first write sets its key's expiry; the writes after it in that window keep it, as
// `SET … KEEPTTL`, which costs Redis about half a `SET … PX`. Watched with MONITOR, on a server
// of the test's own so that no other suite's commands pass through it.
describe.each(['fixed-window', 'sliding-window-counter'] as const)(
  '%s on the Redis clock',
  (algorithm) => {
    it("keeps its key's expiry while it counts in a window, and moves it in the next", async () => {
      const server = await ownServer();
      const redis = clientOf(server.url);
      const prefix = uniquePrefix('keep-expiry');
      const limiterClient = clientOf(server.url);
      const limiter = owned(
        createLimiter({ redis: limiterClient, prefix, limit: 100, window: '2s', algorithm }),
      );
      const key = `${prefix}:{client}:100-per-2s:${algorithm}`;
      const sets: string[][] = [];
      const monitor = await monitorOnceReady(redis, [limiterClient]);
      monitor.on('monitor', (_time: string, args: string[]) => {
        if (args[0]?.toLowerCase() === 'set' && args[1] === key) sets.push(args.slice(3));
      });
      /** Redis's clock in ms, as `TIME` reads it. */
      const redisNow = async () => {
        const [seconds, micros] = await redis.time();
        return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
      };
      const expiryAt = async () => Number(await redis.call('PEXPIRETIME', key));
      // The expiry a write sets is the script's now plus the TTL it computes, on whichever
      // clock reading the server times PX from: Redis 7.0 takes the SET's own moment, which can
      // be a millisecond after the script's TIME; 7.2 and later the script's start. Either lies
      // between a TIME read before the call and one after it.
      const consumeExpiry = async () => {
        const before = await redisNow();
        const { allowed, resetMs } = await limiter.consume('client');
        const after = await redisNow();
        expect(allowed).toBe(true);
        const expiry = await expiryAt();
        return {
          expiry,
          earliest: before + keyTtl(resetMs),
          latest: after + keyTtl(resetMs),
        };
      };
      // Windows align to the Unix epoch on Redis's clock, which is this machine's.
      const intoNextWindow = () => sleep(2_000 - (Date.now() % 2_000) + 100);
      await intoNextWindow();
      const first = await consumeExpiry();
      expect(first.expiry).toBeGreaterThanOrEqual(first.earliest);
      expect(first.expiry).toBeLessThanOrEqual(first.latest);
      await sleep(300);
      await limiter.consume('client');
      expect(await expiryAt()).toBe(first.expiry);
      await intoNextWindow();
      const next = await consumeExpiry();
      expect(next.expiry).toBeGreaterThanOrEqual(next.earliest);
      expect(next.expiry).toBeLessThanOrEqual(next.latest);
      expect(next.expiry).toBeGreaterThan(first.expiry);
      await waitFor(() => sets.length === 3);
      expect(sets.map((rest) => rest[0]?.toUpperCase())).toEqual(['PX', 'KEEPTTL', 'PX']);
    });
  },
);

// Every expiry a script sets is its state's reset and a millisecond more (EXPIRY_MARGIN_MS in
// lua/prelude/state.lua), since Redis 7.2 and later time it from the script's start, which can read a
// millisecond before TIME. Redis 7.0 times it from the command itself, so the margin shows in
// the argument: watched with MONITOR, under a given clock, which makes every write a PX.
describe('the expiry a write sets', () => {
  it.each(ALGORITHMS)('%s: its reset and a millisecond more', async (algorithm) => {
    const server = await ownServer();
    const redis = clientOf(server.url);
    const clock = manualClock();
    const prefix = uniquePrefix('margin');
    const limiterClient = clientOf(server.url);
    const limiter = owned(
      createLimiter({
        ...onRedis(limiterClient, { clock: clock.now }),
        prefix,
        limit: 5,
        window: '1m',
        algorithm,
      }),
    );
    const key = `${prefix}:{client}:5-per-1m:${algorithm}`;
    const expiries: Array<string | undefined> = [];
    const monitor = await monitorOnceReady(redis, [limiterClient]);
    monitor.on('monitor', (_time: string, [command, target, ...rest]: string[]) => {
      if (target !== key) return;
      // SET <key> <state> PX <ms>, or the log's PEXPIRE <key> <ms>.
      if (command?.toLowerCase() === 'set') expiries.push(rest[1] === 'PX' ? rest[2] : rest[1]);
      if (command?.toLowerCase() === 'pexpire') expiries.push(rest[0]);
    });
    clock.advance(12_345);
    const resets: number[] = [];
    for (const cost of [2, 1]) {
      const decision = await limiter.consume('client', { cost });
      expect(decision.allowed).toBe(true);
      resets.push(decision.resetMs);
      clock.advance(1_500);
    }
    await waitFor(() => expiries.length === 2);
    expect(expiries).toEqual(resets.map((reset) => String(reset + 1)));
  });
});

describe('with the memory store', () => {
  function setup(algorithm: Algorithm, options: { sweepIntervalMs?: number; start?: number } = {}) {
    const clock = manualClock(options.start);
    const memory = new MemoryStore({
      clock: clock.now,
      ...(options.sweepIntervalMs && { sweepIntervalMs: options.sweepIntervalMs }),
    });
    const limiter = createLimiter({ store: memory, limit: 3, window: '1m', algorithm });
    return { clock, limiter, memory };
  }

  describe.each(ALGORITHMS)('%s', (algorithm) => {
    it('holds a key until its resetMs has passed on the limiter clock, then frees it', async () => {
      const { clock, limiter, memory } = setup(algorithm);
      clock.advance(7_777);
      const { resetMs } = await limiter.consume('client', { cost: 2 });
      expect(memory.size).toBe(1);
      clock.advance(resetMs - 1);
      await limiter.peek('client');
      expect(memory.size).toBe(1);
      clock.advance(1);
      expect((await limiter.peek('client')).remaining).toBe(3);
      expect(memory.size).toBe(0);
    });

    it('holds nothing after a peek, a cost above the limit, or a reset', async () => {
      const { limiter, memory } = setup(algorithm);
      await limiter.peek('client');
      await limiter.consume('client', { cost: 4 });
      expect(memory.size).toBe(0);
      await limiter.consume('client');
      expect(memory.size).toBe(1);
      await limiter.reset('client');
      expect(memory.size).toBe(0);
    });
  });

  // Keys expire on the clock the requests carry; a sweep on the wall clock would wipe live state
  // whenever an injected clock lags it.
  it('keeps live state through a sweep when the limiter clock lags the wall clock', async () => {
    const { limiter, memory } = setup('token-bucket', {
      sweepIntervalMs: 10,
      start: Math.floor((Date.now() - 86_400_000) / 60_000) * 60_000,
    });
    for (let i = 0; i < 3; i++) await limiter.consume('client');
    expect((await limiter.consume('client')).allowed).toBe(false);
    await sleep(100);
    try {
      expect((await limiter.consume('client')).allowed).toBe(false);
      expect(memory.size).toBe(1);
    } finally {
      memory.close();
    }
  });
});
