// Several policies at once: one call checks them all and consumes from all or from none.
import { describe, expect, it } from 'vitest';
import { uniquePrefix } from '../../../../test/harness/clients.ts';
import { commandCalls } from '../../../../test/harness/connection-checks.ts';
import { clientOf, owned, ownServer } from '../../../../test/harness/own-redis.ts';
import { failOnError } from '../../../../test/harness/store-errors.ts';
import { createLimiter, type PolicyOptions } from '../../src/index.ts';
import { limiterOn, manualClock, STORES } from '../stores.ts';

describe.each(STORES)('with the %s store', (store) => {
  const policies: PolicyOptions[] = [
    { name: 'per-second', limit: 3, window: '1s', algorithm: 'token-bucket' },
    { name: 'per-hour', limit: 5, window: '1h', algorithm: 'sliding-window-log' },
  ];

  it('consumes from every policy when all admit', async () => {
    const clock = manualClock();
    const limiter = limiterOn(store, { policies, clock: clock.now });
    const decision = await limiter.consume('tenant');
    expect(decision.allowed).toBe(true);
    expect(decision.policies.map((p) => [p.policy, p.remaining])).toEqual([
      ['per-second', 2],
      ['per-hour', 4],
    ]);
  });

  it('consumes from none when one refuses', async () => {
    const clock = manualClock();
    const limiter = limiterOn(store, { policies, clock: clock.now });
    for (let i = 0; i < 3; i++) await limiter.consume('tenant');
    const refused = await limiter.consume('tenant');
    expect(refused.allowed).toBe(false);
    expect(refused.policy).toBe('per-second');
    // The hourly policy admitted on its own, yet nothing was taken from it.
    const hourly = refused.policies[1];
    expect(hourly).toMatchObject({ policy: 'per-hour', allowed: true, remaining: 2 });
    expect((await limiter.peek('tenant')).policies[1]?.remaining).toBe(2);
  });

  it('names the policy that blocks longest, with its retry time', async () => {
    const clock = manualClock();
    const limiter = limiterOn(store, { policies, clock: clock.now });
    for (let i = 0; i < 5; i++) {
      expect((await limiter.consume('tenant')).allowed).toBe(true);
      clock.advance(400);
    }
    // Both policies are now exhausted or nearly: the hour blocks far longer than the second.
    const refused = await limiter.consume('tenant');
    expect(refused.allowed).toBe(false);
    expect(refused.policy).toBe('per-hour');
    expect(refused.retryAfterMs).toBe(3_600_000 - 5 * 400);
    clock.advance(refused.retryAfterMs - 1);
    expect((await limiter.consume('tenant')).allowed).toBe(false);
    clock.advance(1);
    expect((await limiter.consume('tenant')).allowed).toBe(true);
  });

  it('names the policy with the least left when admitted', async () => {
    const clock = manualClock();
    const limiter = limiterOn(store, { policies, clock: clock.now });
    const first = await limiter.consume('tenant', { cost: 2 });
    expect(first).toMatchObject({ allowed: true, policy: 'per-second', remaining: 1, limit: 3 });
  });

  it('refuses a request that costs more than one policy allows, for ever', async () => {
    const limiter = limiterOn(store, { policies, clock: manualClock().now });
    const decision = await limiter.consume('tenant', { cost: 4 });
    expect(decision).toMatchObject({ allowed: false, policy: 'per-second' });
    expect(decision.retryAfterMs).toBe(Number.POSITIVE_INFINITY);
    expect((await limiter.peek('tenant')).policies.map((p) => p.remaining)).toEqual([3, 5]);
  });

  it('applies a tier of several policies chosen per call', async () => {
    const clock = manualClock();
    const limiter = limiterOn(store, {
      clock: clock.now,
      tiers: {
        FREE: { limit: 2, window: '1m' },
        PRO: [
          { name: 'pro-minute', limit: 100, window: '1m' },
          { name: 'pro-burst', limit: 4, window: '1s', algorithm: 'gcra' },
        ],
      },
    });
    const free = [];
    const pro = [];
    for (let i = 0; i < 6; i++) {
      free.push((await limiter.consume('a')).allowed);
      pro.push((await limiter.consume('b', { tier: 'PRO' })).allowed);
    }
    expect(free).toEqual([true, true, false, false, false, false]);
    expect(pro).toEqual([true, true, true, true, false, false]);
    const decision = await limiter.peek('b', { tier: 'PRO' });
    expect(decision.tier).toBe('PRO');
    expect(decision.policies.map((p) => p.remaining)).toEqual([96, 0]);
    await limiter.reset('b');
    expect((await limiter.peek('b', { tier: 'PRO' })).policies.map((p) => p.remaining)).toEqual([
      100, 4,
    ]);
  });
});

describe('several policies on Redis', () => {
  // Counts every command the scripts run, on a server of this test's own so no other suite's
  // calls are counted.
  it('reads each policy key once, and writes them only when every policy admits', async () => {
    const server = await ownServer();
    const admin = clientOf(server.url);
    const limiter = owned(
      createLimiter({
        redis: clientOf(server.url),
        prefix: uniquePrefix('reads'),
        onError: failOnError,
        policies: [
          { name: 'per-minute', limit: 2, window: '1m', algorithm: 'token-bucket' },
          { name: 'per-hour', limit: 100, window: '1h', algorithm: 'gcra' },
        ],
      }),
    );
    await limiter.peek('warm-up');
    const counts = async () => {
      const [get, set] = [await commandCalls([admin], 'get'), await commandCalls([admin], 'set')];
      await admin.config('RESETSTAT');
      return { get, set };
    };
    await admin.config('RESETSTAT');
    for (let i = 0; i < 2; i++) {
      expect((await limiter.consume('tenant')).allowed).toBe(true);
      expect(await counts()).toEqual({ get: 2, set: 2 });
    }
    // Refused by the minute: a look at each, and nothing written, the hour left as it was.
    const refused = await limiter.consume('tenant');
    expect(refused.allowed).toBe(false);
    expect(refused.policies[1]).toMatchObject({ allowed: true, remaining: 98 });
    expect(await counts()).toEqual({ get: 2, set: 0 });
  });
});
