// Bursts against a healthy Redis must be counted, not degraded: cold start, NOSCRIPT, busy Redis.
import { setTimeout as sleep } from 'node:timers/promises';
import type { RedisOptions } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { awayFromWindowEdge } from '../examples/race-demo/fleet.ts';
import {
  type Algorithm,
  createLimiter,
  type Decision,
  type Limiter,
  type SentinelError,
} from '../packages/core/src/index.ts';
import { uniquePrefix } from './harness/clients.ts';
import { commandCalls, scriptCalls } from './harness/connection-checks.ts';
import { clientOf, limiterOn, owned, ownServer } from './harness/own-redis.ts';

const DAY_MS = 86_400_000;

function fire(limiter: Limiter, key: string, count: number): Promise<Decision[]> {
  return Promise.all(Array.from({ length: count }, () => limiter.consume(key)));
}

function summary(decisions: Decision[], errors: SentinelError[]) {
  return {
    admitted: decisions.filter((d) => d.allowed && d.degraded === undefined).length,
    degraded: decisions.filter((d) => d.degraded !== undefined).length,
    errors: [...new Set(errors.map((e) => `${e.code}: ${e.message}`))],
  };
}

/** Blocks this process, as a long GC pause or synchronous work would. */
function stall(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // busy
  }
}

/** Keeps Redis busy, answering no one, for ARGV[1] ms. */
const SLOW_SCRIPT = `
local function micros() local t = redis.call('TIME') return t[1] * 1000000 + t[2] end
local until_us = micros() + tonumber(ARGV[1]) * 1000
repeat until micros() >= until_us
return 1`;

const COLD_CLIENTS: Record<string, RedisOptions> = {
  'default client settings': {},
  'enableOfflineQueue: false': { enableOfflineQueue: false },
  // Not even connecting yet: the store must start the connection itself.
  'lazyConnect: true': { lazyConnect: true },
};

describe.each(['token-bucket', 'fixed-window'] as Algorithm[])('%s', (algorithm) => {
  it.each(Object.entries(COLD_CLIENTS))(
    'admits exactly 100 of 1000 calls fired before the first connection, with %s',
    async (_, settings) => {
      const server = await ownServer();
      const admin = clientOf(server.url);
      await admin.script('FLUSH');
      // limiterOn counts a day: a fixed window that turned over mid-burst would admit 100 more.
      if (algorithm === 'fixed-window') await awayFromWindowEdge(admin, DAY_MS);
      const client = clientOf(server.url, settings);
      expect(client.status).not.toBe('ready');
      const { limiter, errors } = limiterOn(client, { limit: 100, algorithm });

      const decisions = await fire(limiter, 'gateway', 1000);
      expect(summary(decisions, errors)).toEqual({ admitted: 100, degraded: 0, errors: [] });
    },
  );
});

describe('a cold script', () => {
  it('costs one EVAL per connection, not one per call, and counts every call once', async () => {
    const server = await ownServer();
    const clients = [clientOf(server.url), clientOf(server.url)];
    const prefix = uniquePrefix('cold');
    const limiters = clients.map((client) =>
      owned(createLimiter({ redis: client, prefix, limit: 100, window: '1d' })),
    );
    const decisions = await Promise.all(
      Array.from({ length: 1000 }, (_, i) => (limiters[i % 2] as Limiter).consume('tenant')),
    );
    expect(summary(decisions, [])).toEqual({ admitted: 100, degraded: 0, errors: [] });
    // A connection's first NOSCRIPT sends the source once, and the calls that met NOSCRIPT with
    // it send the SHA again once it is loaded. A connection whose calls arrive after the other's
    // load meets no NOSCRIPT at all.
    const admin = [clientOf(server.url)];
    const evals = await commandCalls(admin, 'eval');
    expect(evals).toBeGreaterThanOrEqual(1);
    expect(evals).toBeLessThanOrEqual(2);
    expect(await commandCalls(admin, 'evalsha')).toBeLessThanOrEqual(2 * 1000 - evals);
  });
});

describe('a busy but healthy Redis', () => {
  it('admits exactly 1000 of 5000 concurrent calls over one connection', async () => {
    const server = await ownServer();
    const client = clientOf(server.url);
    const { warmUp, limiter, errors } = limiterOn(client, { limit: 1000 });
    await warmUp();

    const decisions = await fire(limiter, 'busy', 5000);
    expect(summary(decisions, errors)).toEqual({ admitted: 1000, degraded: 0, errors: [] });
  });

  /** A limiter of 10 a day with default options on a server of the test's own, warmed up. */
  async function warmLimiter() {
    const server = await ownServer();
    const { warmUp, limiter, errors } = limiterOn(clientOf(server.url), { limit: 10 });
    await warmUp();
    // Let the store's deadline timer go idle, so the stall starts from a clean event loop.
    await sleep(100);
    return { server, limiter, errors };
  }

  /** Fires 100 calls for `key`, then blocks this process for `ms` before it can read a reply. */
  function fireThenStall(limiter: Limiter, key: string, ms: number): Promise<Decision[]> {
    return new Promise((resolve) => {
      setTimeout(() => {
        const decisions = fire(limiter, key, 100);
        stall(ms);
        resolve(decisions);
      }, 0);
    });
  }

  // The store promises not to blame Redis for replies its own busy event loop had not yet read.
  it('keeps waiting for replies its own stalled event loop had not read', async () => {
    const { limiter, errors } = await warmLimiter();
    const decisions = await fireThenStall(limiter, 'stalled', 120);
    expect(summary(decisions, errors)).toEqual({ admitted: 10, degraded: 0, errors: [] });
  });

  // Redis runs a slow script for 300 ms, and this process is blocked for all but the last
  // 20 ms of it: Redis was silent far longer than the deadline, but this process heard only a
  // little of that silence, so the calls wait for their replies.
  it('does not blame Redis for the part of its silence this process was too busy to hear', async () => {
    const { server, limiter, errors } = await warmLimiter();
    const admin = clientOf(server.url);
    await admin.ping();
    const slow = admin.eval(SLOW_SCRIPT, 0, '300');
    const decisions = await fireThenStall(limiter, 'slow', 280);
    await slow;
    expect(summary(decisions, errors)).toEqual({ admitted: 10, degraded: 0, errors: [] });
  });

  // Work queued in the same turn of the event loop as the store's deadline check runs just
  // before it: here it sends the burst and then blocks for longer than the backstop, while the
  // replies wait unread. The check must look again once the loop has read them.
  it('does not blame Redis for replies that work queued before its deadline check kept unread', async () => {
    const { limiter, errors } = await warmLimiter();
    // A call settles, and the store's 10 ms deadline timer runs on for a turn.
    await limiter.consume('timer');
    const decisions = await new Promise<Promise<Decision[]>>((resolve) => {
      // Due before the store's next tick; both run in one timers phase after the stall below,
      // so this immediate is queued before the store's check.
      setTimeout(() => {
        setImmediate(() => {
          const burst = fire(limiter, 'unread', 100);
          stall(700);
          resolve(burst);
        });
      }, 1);
      stall(20);
    });
    expect(summary(await decisions, errors)).toEqual({ admitted: 10, degraded: 0, errors: [] });
  });

  // A store that read its first replies late, as a busy process does, knows Redis's clock only
  // to within that lateness. Its next call must still reach Redis in time: an expiry taken from
  // the earliest reading Redis's clock might then have passes before the call arrives, and Redis
  // does nothing with it until it is sent again. In a burst of such calls from a busy process,
  // each one sent again could come too late again, and the burst was answered without Redis.
  it('sends calls Redis can still run after reading its first replies late', async () => {
    const server = await ownServer();
    const admin = clientOf(server.url);
    // Another limiter loads Sentinel's code: the one under test knows nothing of Redis yet.
    await limiterOn(clientOf(server.url)).warmUp();
    const client = clientOf(server.url);
    await client.ping();
    const { limiter, errors } = limiterOn(client, { limit: 10 });
    const first = limiter.consume('late');
    // Queued after the store's own immediate, which sends the call: the reply waits unread.
    setImmediate(() => stall(60));
    expect((await first).degraded).toBeUndefined();
    await admin.config('RESETSTAT');
    const next = await limiter.consume('late');
    expect(next).toMatchObject({ allowed: true, remaining: 8 });
    expect(next.degraded).toBeUndefined();
    // Run once: not first refused by Redis as late, then sent again.
    expect(await scriptCalls([admin])).toBe(1);
    expect(errors).toEqual([]);
  });

  // Longer than the wall-clock backstop (10 × timeout): a process that was blocked itself could
  // not have heard Redis, so the wait counts for nothing, however long.
  it('keeps waiting through a stall of its own longer than the backstop', async () => {
    const { limiter, errors } = await warmLimiter();
    const decisions = await fireThenStall(limiter, 'stalled', 700);
    expect(summary(decisions, errors)).toEqual({ admitted: 10, degraded: 0, errors: [] });
  });
});
