// Policies a call brings with it, a tenant's own limits: in place of the tier's, compiled once,
// and state that stays right when the limit changes, on memory and Redis alike.
import { afterEach, describe, expect, it } from 'vitest';
import { ALGORITHMS, type Algorithm, type Limiter, type PolicyOptions } from '../../src/index.ts';
import { limiterOn, manualClock, STORES } from '../stores.ts';

const open: Limiter[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((limiter) => limiter.close()));
});

function limiter(store: (typeof STORES)[number], clock = manualClock()) {
  const made = limiterOn(store, {
    tiers: { FREE: { name: 'free', limit: 2, window: '1h' } },
    clock: clock.now,
  });
  open.push(made);
  return made;
}

describe.each(STORES)('on %s', (store) => {
  it("applies a call's own policies in place of its tier's, labelled with the tier", async () => {
    const limits = limiter(store);
    const contract = { name: 'contract', limit: 5, window: '1h' } as const;
    const decisions = [];
    for (let i = 0; i < 6; i++) {
      decisions.push(await limits.consume('tenant', { tier: 'FREE', policies: contract }));
    }
    expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, true, true, false]);
    expect(decisions[5]).toMatchObject({ tier: 'FREE', policy: 'contract', limit: 5 });
    // The tier's own budget was never touched.
    expect(await limits.peek('tenant', { tier: 'FREE' })).toMatchObject({ remaining: 2 });
    // Reset by the same policies deletes their state, and only theirs.
    await limits.reset('tenant', { policies: contract });
    expect(await limits.peek('tenant', { policies: contract })).toMatchObject({ remaining: 5 });
  });

  describe.each(ALGORITHMS)('with %s', (algorithm: Algorithm) => {
    /** 3 consumed under 5 an hour, then the same named policy at `changed`. */
    async function afterChange(changed: Partial<PolicyOptions>) {
      const limits = limiter(store);
      const before: PolicyOptions = { name: 'contract', limit: 5, window: '1h', algorithm };
      for (let i = 0; i < 3; i++) await limits.consume('tenant', { policies: before });
      return limits.consume('tenant', { policies: { ...before, ...changed } });
    }

    it('keeps what was used when the limit of a named policy changes', async () => {
      const decision = await afterChange({ limit: 10 });
      expect(decision.allowed).toBe(true);
      // Counters count requests; a bucket keeps its tokens; GCRA keeps its time ahead, 36 of
      // the hour's 60 minutes, where one request is now 6 minutes.
      const expected = { 'token-bucket': 1, gcra: 3 }[algorithm as string] ?? 10 - 4;
      expect(decision.remaining).toBe(expected);
    });

    it('starts afresh, rather than misread its state, when the window of a named policy changes', async () => {
      for (const window of ['1m', '1d'] as const) {
        const decision = await afterChange({ window });
        expect({ window, ...decision }).toMatchObject({ window, allowed: true, remaining: 4 });
      }
    });
  });
});

describe('compiling', () => {
  it('reads a set of policies once, however many calls bring the same object', async () => {
    let reads = 0;
    const policy = new Proxy(
      { name: 'contract', limit: 100, window: '1m' as const },
      {
        get(target, property, receiver) {
          reads++;
          return Reflect.get(target, property, receiver);
        },
      },
    );
    const limits = limiter('memory');
    await limits.consume('tenant', { policies: policy });
    const afterFirst = reads;
    expect(afterFirst).toBeGreaterThan(0);
    for (let i = 0; i < 50; i++) await limits.consume(`tenant-${i}`, { policies: policy });
    expect(reads).toBe(afterFirst);
  });

  it('rejects a bad set with a TypeError naming the field', async () => {
    const limits = limiter('memory');
    await expect(
      limits.consume('tenant', { policies: { limit: -1, window: '1m' } }),
    ).rejects.toThrow(
      expect.objectContaining({
        name: 'TypeError',
        message: expect.stringMatching(/`policies\.limit`/),
      }),
    );
  });
});
