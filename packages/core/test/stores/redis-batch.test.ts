// Batching: decisions that arrive together share one script call, and each stays exact and
// all-or-nothing, with the default options.
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { uniquePrefix } from '../../../../test/harness/clients.ts';
import {
  commandCalls,
  scriptCalls,
  scriptCallsSinceLastLook,
} from '../../../../test/harness/connection-checks.ts';
import { holdReplies } from '../../../../test/harness/late-reply.ts';
import { clientOf, owned, ownServer, scriptsOnlyUrl } from '../../../../test/harness/own-redis.ts';
import { failOnError } from '../../../../test/harness/store-errors.ts';
import { waitFor } from '../../../../test/harness/wait-for.ts';
import {
  ALGORITHMS,
  createLimiter,
  type LimiterOptions,
  type Observer,
  type SentinelError,
} from '../../src/index.ts';
import { MAX_BATCH } from '../../src/stores/redis/batch.ts';
import { type ScriptName, scripts } from '../../src/stores/redis/scripts.generated.ts';
import { onRedis } from '../stores.ts';

/** A limiter on a server of its own; `scriptsOnly` has it run scripts, as before Redis 7. */
async function setup(options: Partial<LimiterOptions>, scriptsOnly = false) {
  const server = await ownServer();
  const admin = clientOf(server.url);
  const limiter = owned(
    createLimiter({
      redis: clientOf(scriptsOnly ? await scriptsOnlyUrl(admin, server) : server.url),
      prefix: uniquePrefix('batch'),
      onError: failOnError,
      ...options,
    }),
  );
  // Connects, and loads the batch script and the function library, so the counts below are of
  // decisions only.
  await Promise.all([limiter.peek('warm-up'), limiter.peek('warm-up')]);
  await admin.config('RESETSTAT');
  /** Calls that ran Sentinel's code since the last look. */
  const calls = scriptCallsSinceLastLook([admin]);
  return { limiter, calls, admin };
}

describe('batching on Redis', () => {
  it('sends a burst in a few calls, and admits exactly the limit', async () => {
    const { limiter, calls } = await setup({ limit: 50, window: '1h' });
    const decisions = await Promise.all(
      Array.from({ length: 400 }, (_, i) => limiter.consume(`client-${i % 4}`)),
    );
    for (let client = 0; client < 4; client++) {
      const mine = decisions.filter((_, i) => i % 4 === client);
      expect(mine.filter((d) => d.allowed)).toHaveLength(50);
      // Each client's admissions come first, in the order of the calls: the batch runs in order.
      expect(mine.slice(0, 50).every((d) => d.allowed)).toBe(true);
      expect(mine.map((d) => d.remaining).slice(0, 50)).toEqual(
        Array.from({ length: 50 }, (_, i) => 49 - i),
      );
    }
    expect(await calls()).toBe(Math.ceil(400 / MAX_BATCH));
  });

  it('keeps each request all-or-nothing across its policies, beside other tiers in the batch', async () => {
    const { limiter } = await setup({
      tiers: {
        FREE: { name: 'free', limit: 4, window: '1h', algorithm: 'fixed-window' },
        PRO: [
          { name: 'pro-hour', limit: 5, window: '1h' },
          { name: 'pro-burst', limit: 3, window: '1h', algorithm: 'gcra' },
        ],
      },
    });
    const decisions = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        limiter.consume('tenant', { tier: i % 2 ? 'PRO' : 'FREE' }),
      ),
    );
    const admitted = (tier: string) => decisions.filter((d) => d.tier === tier && d.allowed).length;
    expect(admitted('FREE')).toBe(4);
    expect(admitted('PRO')).toBe(3);
    // Refused PRO requests took nothing from the hourly policy.
    const hour = (await limiter.peek('tenant', { tier: 'PRO' })).policies[0];
    expect(hour).toMatchObject({ policy: 'pro-hour', remaining: 2 });
    // Answers of one and two policies, admitted and refused, differ in length within the batch's
    // reply: each decision still reads its own.
    const free = decisions.filter((d) => d.tier === 'FREE');
    expect(free.map((d) => [d.allowed, d.remaining])).toEqual([
      [true, 3],
      [true, 2],
      [true, 1],
      [true, 0],
      ...Array.from({ length: 6 }, () => [false, 0]),
    ]);
    for (const refused of free.slice(4)) {
      expect(refused.retryAfterMs).toBeGreaterThan(0);
      expect(refused.policies[0]).toMatchObject({ allowed: false, remaining: 0 });
    }
    const pro = decisions.filter((d) => d.tier === 'PRO');
    expect(pro.map((d) => d.policies.map((p) => [p.allowed, p.remaining]))).toEqual([
      [
        [true, 4],
        [true, 2],
      ],
      [
        [true, 3],
        [true, 1],
      ],
      [
        [true, 2],
        [true, 0],
      ],
      // The hourly policy would admit and shows what a look finds; the burst refuses.
      ...Array.from({ length: 7 }, () => [
        [true, 2],
        [false, 0],
      ]),
    ]);
    for (const refused of pro.slice(3)) {
      expect(refused.retryAfterMs).toBeGreaterThan(0);
      expect(refused.policies[0]?.retryAfterMs).toBe(0);
    }
  });

  it('reads and writes a key once in a batch that decides its identity several times', async () => {
    const { limiter, admin } = await setup({ limit: 50, window: '1h' });
    const decisions = await Promise.all(
      Array.from({ length: 10 }, () => limiter.consume('hot-client')),
    );
    expect(decisions.map((d) => d.remaining)).toEqual([49, 48, 47, 46, 45, 44, 43, 42, 41, 40]);
    const of = (command: string) => commandCalls([admin], command);
    expect({
      calls: await scriptCalls([admin]),
      get: await of('get'),
      set: await of('set'),
    }).toEqual({
      calls: 1,
      get: 1,
      set: 1,
    });
  });

  // A batch sets each key once, at its end: a write that keeps the key's expiry (a fixed
  // window counting on) after one that set it (the window's first request) must keep that one.
  it.each(ALGORITHMS)(
    '%s: a batch on a new key leaves it expiring with its state',
    async (algorithm) => {
      const prefix = uniquePrefix(`batch-expiry-${algorithm}`);
      const { limiter, admin } = await setup({ limit: 50, window: '1m', algorithm, prefix });
      const decisions = await Promise.all(
        Array.from({ length: 10 }, () => limiter.consume('hot-client')),
      );
      expect(decisions.map((d) => d.remaining)).toEqual([49, 48, 47, 46, 45, 44, 43, 42, 41, 40]);
      const keys = await admin.keys(`${prefix}*`);
      expect(keys.length).toBeGreaterThan(0);
      for (const key of keys) {
        const ttl = await admin.pttl(key);
        expect(ttl).toBeGreaterThan(0);
        expect(ttl).toBeLessThanOrEqual(2 * 60_000 + 1);
      }
      expect((await limiter.peek('hot-client')).remaining).toBe(40);
    },
  );

  // A batch whose requests share a plan, a cost and a mode describes them once; any other
  // lists each request's. Both must charge each request its own cost, in order.
  it('charges requests alike their one cost, and requests that differ each their own', async () => {
    const { limiter, calls } = await setup({ limit: 10, window: '1h' });
    const alike = await Promise.all(
      Array.from({ length: 5 }, () => limiter.consume('alike', { cost: 3 })),
    );
    expect(alike.map((d) => [d.allowed, d.remaining])).toEqual([
      [true, 7],
      [true, 4],
      [true, 1],
      [false, 1],
      [false, 1],
    ]);
    expect(await calls()).toBe(1);
    const costs = [4, 4, 1, 4, 1, 1, 2];
    const mixed = await Promise.all(costs.map((cost) => limiter.consume('mixed', { cost })));
    expect(mixed.map((d) => [d.allowed, d.remaining])).toEqual([
      [true, 6],
      [true, 2],
      [true, 1],
      [false, 1],
      [true, 0],
      [false, 0],
      [false, 0],
    ]);
    expect(await calls()).toBe(1);
  });

  it('decides a peek in a batch without consuming', async () => {
    const { limiter } = await setup({ limit: 3, window: '1h' });
    const [first, peek, second] = await Promise.all([
      limiter.consume('client'),
      limiter.peek('client'),
      limiter.consume('client'),
    ]);
    expect([first?.remaining, peek?.remaining, second?.remaining]).toEqual([2, 2, 1]);
  });

  // A batch's requests share one send, and the batch carries its consumes' expiry whatever
  // comes first in it: one that reaches a paused Redis and runs once it resumes counts nothing.
  it('counts nothing when a batch that starts with a peek runs late', async () => {
    const server = await ownServer();
    const admin = clientOf(server.url);
    const prefix = uniquePrefix('batch');
    const errors: SentinelError[] = [];
    const limiter = owned(
      createLimiter({
        redis: clientOf(server.url),
        prefix,
        limit: 5,
        window: '1h',
        // Off so that the last peek asks Redis: the three timeouts would open the default
        // breaker, which would answer it without Redis. test/faults/redis-paused.test.ts checks
        // that nothing counts late with the default options.
        breaker: false,
        onError: (error) => void errors.push(error),
      }),
    );
    await Promise.all([limiter.peek('warm-up'), limiter.peek('warm-up')]);
    await admin.config('RESETSTAT');
    server.pause();
    const decisions = await Promise.all([
      limiter.peek('a'),
      limiter.consume('b'),
      limiter.consume('c'),
    ]);
    expect(decisions.map((d) => d.degraded)).toEqual(['allow', 'allow', 'allow']);
    expect(new Set(errors.map((error) => error.code))).toEqual(new Set(['STORE_TIMEOUT']));
    server.resume();
    expect(await admin.ping()).toBe('PONG');
    // The batch sat in Redis's socket and ran on resume; give it time to have written.
    await sleep(300);
    expect(await scriptCalls([admin])).toBe(1);
    expect(await admin.keys(`${prefix}:*`)).toEqual([]);
    expect((await limiter.peek('b')).remaining).toBe(5);
  });

  // Where Redis functions are missing (before Redis 7) or denied, batches run as scripts.
  it('runs a batch whose requests share one algorithm by a script holding only that algorithm', async () => {
    const { limiter, admin } = await setup(
      {
        tiers: {
          FREE: { name: 'free', limit: 10, window: '1h', algorithm: 'gcra' },
          PRO: [
            { name: 'pro-hour', limit: 10, window: '1h', algorithm: 'gcra' },
            { name: 'pro-minute', limit: 10, window: '1m', algorithm: 'fixed-window' },
          ],
        },
      },
      true,
    );
    const loaded = async (name: ScriptName) =>
      ((await admin.script('EXISTS', scripts[name].sha1)) as number[])[0] === 1;
    await admin.script('FLUSH');
    const burst = (tier: (i: number) => string) =>
      Promise.all(Array.from({ length: 8 }, (_, i) => limiter.consume(`c${i}`, { tier: tier(i) })));
    expect((await burst(() => 'FREE')).every((d) => d.allowed)).toBe(true);
    expect(await loaded('batch-gcra')).toBe(true);
    expect(await loaded('batch')).toBe(false);
    // Requests of a tier with two algorithms, or of tiers with different ones, need them all.
    expect((await burst((i) => (i % 2 ? 'PRO' : 'FREE'))).every((d) => d.allowed)).toBe(true);
    expect(await loaded('batch')).toBe(true);
  });

  // Redis ran the batch in time, but its reply came after the 50 ms deadline: the callers were
  // answered degraded, so what the batch took goes back, once per consume it admitted.
  describe('a batch whose reply comes after the store gave up on it', () => {
    /** With `clock`, the scripts run on it (see script-clock.ts): each call goes alone. */
    async function heldBatch({
      clock,
      ...options
    }: Partial<LimiterOptions> & { clock?: () => number } = {}) {
      const server = await ownServer();
      const client = clientOf(server.url);
      const errors: SentinelError[] = [];
      const refunds: Parameters<NonNullable<Observer['lateRefund']>>[0][] = [];
      const shared = {
        ...onRedis(client, { clock }),
        prefix: uniquePrefix('batch'),
        limit: 10,
        window: '1h',
      };
      const limiter = owned(
        createLimiter({
          ...shared,
          onError: (error) => void errors.push(error),
          observe: { lateRefund: (event) => void refunds.push(event) },
          ...options,
        } as LimiterOptions),
      );
      // What Redis holds, asked past any breaker.
      const remaining = async (key: string) => {
        const checker = createLimiter({ ...shared, ...options, breaker: false } as LimiterOptions);
        try {
          return (await checker.peek(key)).remaining;
        } finally {
          await checker.close();
        }
      };
      await Promise.all([limiter.peek('warm-up'), limiter.peek('warm-up')]);
      return { client, errors, refunds, limiter, remaining };
    }

    it('gives back each consume it admitted, and nothing for its peek or refusal', async () => {
      const { client, errors, refunds, limiter, remaining } = await heldBatch({ limit: 3 });
      // Two of three taken in time: the batch admits one more, then refuses.
      await Promise.all([limiter.consume('tenant'), limiter.consume('tenant')]);
      const held = holdReplies(client, 200);
      const decisions = await Promise.all([
        limiter.consume('tenant'),
        limiter.peek('tenant'),
        limiter.consume('tenant'),
        limiter.consume('other', { cost: 2 }),
      ]);
      expect(decisions.map((d) => d.degraded)).toEqual(['allow', 'allow', 'allow', 'allow']);
      expect(errors.map((e) => e.code)).toEqual(Array(4).fill('STORE_TIMEOUT'));
      await held;
      await waitFor(() => refunds.length === 2, 5_000, 'two late refunds');
      expect(refunds).toEqual([
        { identity: 'tenant', tier: undefined, cost: 1, server: '', error: undefined },
        { identity: 'other', tier: undefined, cost: 2, server: '', error: undefined },
      ]);
      expect(await remaining('tenant')).toBe(1);
      expect(await remaining('other')).toBe(3);
      // The four timeouts opened the breaker: the refunds went all the same, and left it open.
      expect((await limiter.peek('tenant')).degraded).toBe('allow');
      // No refund failed, and nothing was given back twice.
      await sleep(100);
      expect(errors).toHaveLength(4);
      expect(refunds).toHaveLength(2);
    });

    it("gives back a consume sent alone, on a test's clock", async () => {
      const { client, refunds, limiter } = await heldBatch({ clock: () => Date.now() });
      expect((await limiter.consume('tenant')).remaining).toBe(9);
      const held = holdReplies(client, 200);
      expect((await limiter.consume('tenant', { cost: 3 })).degraded).toBe('allow');
      await held;
      await waitFor(() => refunds.length === 1, 5_000, 'a late refund');
      expect(refunds[0]).toMatchObject({ cost: 3, error: undefined });
      expect((await limiter.peek('tenant')).remaining).toBe(9);
    });

    it('sends the refund once, and reports it when it too is given up on', async () => {
      // Four timeouts would open the breaker, and a peek would then be answered without Redis.
      const { client, errors, refunds, limiter } = await heldBatch({ breaker: false });
      expect((await limiter.consume('tenant')).remaining).toBe(9);
      // The consume, then its refund, each answered late.
      const held = holdReplies(client, 200, 2);
      await Promise.all([limiter.consume('tenant'), limiter.consume('tenant')]);
      await held;
      await waitFor(() => refunds.length === 2, 5_000, 'two late refunds');
      for (const { error } of refunds) {
        expect(error?.code).toBe('STORE_TIMEOUT');
        expect(error?.message).toMatch(/admitted after all, and giving back its cost of 1 failed/);
      }
      expect(errors.slice(2)).toEqual(refunds.map((refund) => refund.error));
      // Redis ran the refunds, late: they were not sent again, so each gave back once.
      expect((await limiter.peek('tenant')).remaining).toBe(9);
    });
  });
});
