// consume, peek and reset answer a bad key and an unknown tier alike, on every store.
import { describe, expect, it } from 'vitest';
import { createLimiter, type SentinelError } from '../../src/index.ts';
import { recordWarnings } from '../construction-errors.ts';
import { limiterOn, manualClock, STORES } from '../stores.ts';

const TIERS = {
  FREE: { limit: 2, window: '1h' },
  PRO: { limit: 5, window: '1h' },
} as const;

describe.each(STORES)('with the %s store', (store) => {
  function limiter() {
    const errors: SentinelError[] = [];
    const clock = manualClock();
    const made = limiterOn(store, {
      tiers: TIERS,
      clock: clock.now,
      onError: (error) => errors.push(error),
    });
    return { limiter: made, errors };
  }

  it.each([[42], [undefined], [null], [{ id: 'a' }]])(
    'a key of %j is a TypeError naming `key` from consume, peek and reset, reported nowhere',
    async (key) => {
      const { limiter: l, errors } = limiter();
      const bad = key as unknown as string;
      await expect(l.consume(bad)).rejects.toThrow(/^@sentinel\/core: `key` must be a string/);
      await expect(l.peek(bad)).rejects.toThrow(/^@sentinel\/core: `key` must be a string/);
      await expect(l.reset(bad)).rejects.toThrow(/^@sentinel\/core: `key` must be a string/);
      await expect(l.reset(bad, { tier: 'FREE' })).rejects.toBeInstanceOf(TypeError);
      expect(errors).toEqual([]);
    },
  );

  it('an unknown tier is reported by consume, peek and reset alike, and none of them throws', async () => {
    const { limiter: l, errors } = limiter();
    const consumed = await l.consume('tenant', { tier: 'GOLD' });
    expect(consumed).toMatchObject({ allowed: true, degraded: 'allow' });
    expect(consumed.error?.code).toBe('UNKNOWN_TIER');
    expect((await l.peek('tenant', { tier: 'GOLD' })).error?.code).toBe('UNKNOWN_TIER');
    await expect(l.reset('tenant', { tier: 'GOLD' })).resolves.toBeUndefined();
    expect(errors.map((e) => [e.code, e.message])).toEqual([
      ['UNKNOWN_TIER', "No tier named 'GOLD'"],
      ['UNKNOWN_TIER', "No tier named 'GOLD'"],
      ['UNKNOWN_TIER', "No tier named 'GOLD'"],
    ]);
  });

  it("resetting an unknown tier deletes nothing; resetting the key's own tier does", async () => {
    const { limiter: l } = limiter();
    await l.consume('tenant');
    await l.consume('tenant');
    expect((await l.peek('tenant')).allowed).toBe(false);
    await l.reset('tenant', { tier: 'GOLD' });
    expect((await l.peek('tenant')).allowed).toBe(false);
    // The positive control: the same call with the tier the state is under frees it.
    await l.reset('tenant', { tier: 'FREE' });
    expect((await l.peek('tenant')).remaining).toBe(2);
  });
});

describe('an onError that throws', () => {
  const warnings = recordWarnings();

  it('still gets its decision, and the throw becomes a process warning', async () => {
    const limiter = createLimiter({
      tiers: TIERS,
      onError: () => {
        throw new Error('logger down');
      },
    });
    const decision = await limiter.consume('tenant', { tier: 'GOLD' });
    expect(decision).toMatchObject({ allowed: true, degraded: 'allow' });
    await expect(limiter.reset('tenant', { tier: 'GOLD' })).resolves.toBeUndefined();
    await warnings.settled();
    expect(warnings.list.map((w) => w.message)).toEqual([
      '@sentinel/core: onError threw: logger down',
      '@sentinel/core: onError threw: logger down',
    ]);
    await limiter.close();
  });
});
