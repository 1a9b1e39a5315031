// Concurrency policies: slots held from admission until released, or until their lease ends,
// decided with the rate policies in the same store call, on every store.
import { describe, expect, it } from 'vitest';
import { connect, uniquePrefix } from '../../../../test/harness/clients.ts';
import {
  createLimiter,
  type Decision,
  type LimiterOptions,
  type TierOptions,
} from '../../src/index.ts';
import { limiterOn, manualClock, STORES } from '../stores.ts';

describe.each(STORES)('with the %s store', (store) => {
  it('admits exactly `concurrency` requests at once, and as many again once they are released', async () => {
    const limiter = limiterOn(store, { concurrency: 5 });
    const first = await Promise.all(Array.from({ length: 40 }, () => limiter.consume('tenant')));
    const admitted = first.filter((d) => d.allowed);
    expect(admitted).toHaveLength(5);
    expect(admitted.every((d) => d.lease?.policies.length === 1)).toBe(true);
    expect(first.filter((d) => !d.allowed).every((d) => d.lease === undefined)).toBe(true);
    expect(await Promise.all(admitted.slice(0, 2).map((d) => limiter.release(d)))).toEqual([
      true,
      true,
    ]);
    const second = await Promise.all(Array.from({ length: 10 }, () => limiter.consume('tenant')));
    expect(second.filter((d) => d.allowed)).toHaveLength(2);
    // Every slot back, then nothing held: all five free again.
    for (const d of [...admitted.slice(2), ...second]) await limiter.release(d);
    const third = await Promise.all(Array.from({ length: 10 }, () => limiter.consume('tenant')));
    expect(third.filter((d) => d.allowed)).toHaveLength(5);
    await limiter.close();
  });

  it('releases once: a second release, or one of a refused decision, frees nothing', async () => {
    const limiter = limiterOn(store, { concurrency: 2 });
    const a = await limiter.consume('tenant');
    const b = await limiter.consume('tenant');
    const refused = await limiter.consume('tenant');
    expect([a.allowed, b.allowed, refused.allowed]).toEqual([true, true, false]);
    expect(await limiter.release(refused)).toBe(false);
    expect(await limiter.release(a)).toBe(true);
    expect(await limiter.release(a)).toBe(false);
    // One slot free, b's still held.
    expect((await limiter.consume('tenant')).allowed).toBe(true);
    expect((await limiter.consume('tenant')).allowed).toBe(false);
    await limiter.close();
  });

  it('frees a slot never released when its lease ends, and says when in its retry', async () => {
    const clock = manualClock();
    const limiter = limiterOn(store, { concurrency: 1, lease: '2s', clock: clock.now });
    expect((await limiter.consume('tenant')).allowed).toBe(true);
    clock.advance(500);
    const refused = await limiter.consume('tenant');
    expect(refused.allowed).toBe(false);
    // The lease taken 500 ms ago ends in 1500 ms: the latest the slot can come back.
    expect(refused.retryAfterMs).toBe(1500);
    clock.advance(1500);
    expect((await limiter.consume('tenant')).allowed).toBe(true);
    await limiter.close();
  });

  it('answers false to a release after the lease ended, and frees no slot taken since', async () => {
    const clock = manualClock();
    const limiter = limiterOn(store, { concurrency: 1, lease: '2s', clock: clock.now });
    const late = await limiter.consume('tenant');
    clock.advance(2500);
    const next = await limiter.consume('tenant');
    expect(next.allowed).toBe(true);
    expect(await limiter.release(late)).toBe(false);
    // The slot taken since is still held.
    expect((await limiter.consume('tenant')).allowed).toBe(false);
    expect(await limiter.release(next)).toBe(true);
    await limiter.close();
  });

  it('renews a lease from now while it is held, and not once it has ended', async () => {
    const clock = manualClock();
    const limiter = limiterOn(store, { concurrency: 1, lease: '2s', clock: clock.now });
    const held = await limiter.consume('tenant');
    clock.advance(1500);
    expect(await limiter.renew(held)).toBe(true);
    clock.advance(1500);
    // Past the first lease's end, within the renewed one.
    expect((await limiter.consume('tenant')).allowed).toBe(false);
    // The release finds the slots where the renewal moved them.
    expect(await limiter.release(held)).toBe(true);
    const next = await limiter.consume('tenant');
    expect(next.allowed).toBe(true);
    clock.advance(2500);
    expect(await limiter.renew(next)).toBe(false);
    expect(await limiter.release(next)).toBe(false);
    await limiter.close();
  });

  it('takes renewals and releases sent together in turn, so no slot is left held', async () => {
    const clock = manualClock();
    const limiter = limiterOn(store, { concurrency: 1, lease: '30s', clock: clock.now });
    const a = await limiter.consume('tenant');
    clock.advance(20);
    // A release sent while a renewal is on its way must find the slot where the renewal put it.
    expect(await Promise.all([limiter.renew(a), limiter.release(a)])).toEqual([true, true]);
    const b = await limiter.consume('tenant');
    expect(b.allowed).toBe(true);
    clock.advance(20);
    expect(await Promise.all([limiter.renew(b), limiter.renew(b)])).toEqual([true, true]);
    expect(await limiter.release(b)).toBe(true);
    expect((await limiter.consume('tenant')).allowed).toBe(true);
    await limiter.close();
  });

  it('decides rate and concurrency together: a refusal by either takes nothing from the other', async () => {
    const policies: TierOptions = [
      { name: 'rate', limit: 3, window: '1m' },
      { name: 'slots', concurrency: 1 },
    ];
    const limiter = limiterOn(store, { policies });
    const held = await limiter.consume('tenant');
    expect(held.allowed).toBe(true);
    const busy = await limiter.consume('tenant');
    expect(busy.allowed).toBe(false);
    expect(busy.policy).toBe('slots');
    // Refused for concurrency: the rate quota is as the first request left it.
    expect((await limiter.peek('tenant')).policies[0]?.remaining).toBe(2);
    await limiter.release(held);
    const decisions: Decision[] = [];
    for (let i = 0; i < 2; i++) {
      const d = await limiter.consume('tenant');
      expect(d.allowed).toBe(true);
      decisions.push(d);
      await limiter.release(d);
    }
    // The rate is spent: a rate refusal holds no slot, so the slot stays free.
    const spent = await limiter.consume('tenant');
    expect(spent.allowed).toBe(false);
    expect(spent.policy).toBe('rate');
    expect(spent.lease).toBeUndefined();
    expect((await limiter.peek('tenant')).policies[1]?.remaining).toBe(1);
    await limiter.close();
  });

  it('refunds the rate alone, and releases the slots alone', async () => {
    const limiter = limiterOn(store, { limit: 5, window: '1m', concurrency: 1 });
    const d = await limiter.consume('tenant');
    expect(await limiter.refund('tenant', { decision: d })).toBe(true);
    const after = await limiter.peek('tenant');
    expect(after.policies.map((p) => p.remaining)).toEqual([5, 0]);
    expect(await limiter.release(d)).toBe(true);
    expect((await limiter.peek('tenant')).policies.map((p) => p.remaining)).toEqual([5, 1]);
    await limiter.close();
  });

  it('holds `cost` slots for a request of that cost', async () => {
    const limiter = limiterOn(store, { concurrency: 5 });
    const big = await limiter.consume('tenant', { cost: 4 });
    expect(big.allowed).toBe(true);
    expect(big.remaining).toBe(1);
    expect((await limiter.consume('tenant', { cost: 2 })).allowed).toBe(false);
    const small = await limiter.consume('tenant', { cost: 1 });
    expect(small.allowed).toBe(true);
    await limiter.release(big);
    expect((await limiter.consume('tenant', { cost: 4 })).allowed).toBe(true);
    // A cost over the whole concurrency is never admitted.
    expect((await limiter.consume('other', { cost: 6 })).retryAfterMs).toBe(
      Number.POSITIVE_INFINITY,
    );
    await limiter.close();
  });
});

describe('closing', () => {
  it('lets a release under way finish before it closes the Redis store, so its slot is free', async () => {
    const redis = connect();
    const prefix = uniquePrefix('close-release');
    const errors: Error[] = [];
    const options: LimiterOptions = {
      redis,
      prefix,
      concurrency: 1,
      lease: '1m',
      onError: (e: Error) => errors.push(e),
    };
    const closing = createLimiter(options);
    const held = await closing.consume('tenant');
    expect(held.allowed).toBe(true);
    // Sent, its reply not yet read (microtasks let no I/O in), and the limiter closed then, as
    // when a response ends while the app shuts down: the release must finish, not fail.
    const released = closing.release(held);
    for (let turn = 0; turn < 10; turn++) await Promise.resolve();
    await closing.close();
    expect(await released).toBe(true);
    expect(errors).toEqual([]);
    const other = createLimiter(options);
    expect((await other.consume('tenant')).allowed).toBe(true);
    await other.close();
    redis.disconnect();
  });
});

describe('concurrency options', () => {
  it('takes the shorthand alone and beside a rate policy, and in tiers', async () => {
    const alone = createLimiter({ concurrency: 2 });
    expect((await alone.consume('k')).policies).toMatchObject([
      { policy: '2-in-flight', algorithm: 'concurrency', limit: 2, windowMs: 60_000 },
    ]);
    const both = createLimiter({ limit: 10, window: '1m', concurrency: 3, lease: '30s' });
    expect((await both.consume('k')).policies).toMatchObject([
      { policy: '10-per-1m', limit: 10 },
      { policy: '3-in-flight', algorithm: 'concurrency', limit: 3, windowMs: 30_000 },
    ]);
    const tiers = createLimiter({
      tiers: { FREE: [{ limit: 10, window: '1m' }, { concurrency: 2 }] },
    });
    expect((await tiers.consume('k')).policies[1]?.policy).toBe('free-2-in-flight');
    await Promise.all([alone.close(), both.close(), tiers.close()]);
  });

  it('refuses a bad concurrency policy with a TypeError naming the field', () => {
    expect(() => createLimiter({ concurrency: 0 })).toThrow(/concurrency/);
    expect(() => createLimiter({ concurrency: 0 })).toThrow(TypeError);
    expect(() => createLimiter({ concurrency: 2, lease: 'soon' as never })).toThrow(/lease/);
    expect(() => createLimiter({ lease: '1m' })).toThrow(/concurrency/);
    expect(() => createLimiter({ policies: [{ concurrency: 2, limit: 3 } as never] })).toThrow(
      /policies\[0\]\.limit/,
    );
    expect(() => createLimiter({ concurrency: 10_001 })).toThrow(/concurrency/);
    // Beside a rate policy, the shorthand's fields are still named as written.
    expect(() => createLimiter({ limit: 0, window: '1m', concurrency: 2 })).toThrow(/`limit` must/);
    expect(() => createLimiter({ limit: 5, window: '1m', concurrency: 0 })).toThrow(
      /`concurrency` must/,
    );
    expect(() => createLimiter({ concurrency: 2, policies: { limit: 1, window: '1s' } })).toThrow(
      /cannot be combined/,
    );
  });
});
