// consumeJointly: one decision for several identities, all-or-nothing, each policy counted in
// the bucket its identity's own consume uses.
import { describe, expect, it } from 'vitest';
import { descriptorKey, storageIdentity } from '../../src/index.ts';
import { limiterOn, manualClock, STORES } from '../stores.ts';

const PER_TENANT = { name: 'tenant', limit: 3, window: '1m', algorithm: 'fixed-window' } as const;
const PER_ROUTE = { name: 'route', limit: 5, window: '1m', algorithm: 'fixed-window' } as const;
/** The limiter's own policies, which every call here replaces with its own. */
const UNUSED = { limit: 1, window: '1m' } as const;

/**
 * A limiter deciding on a clock that stands still: each test counts within one minute's fixed
 * windows, which a real clock could roll over between two of its calls.
 */
const limiterOnStill = (store: (typeof STORES)[number]) =>
  limiterOn(store, { ...UNUSED, clock: manualClock().now });

describe.each(STORES)('with the %s store', (store) => {
  it('counts each policy in the bucket of its own key, shared with plain consumes', async () => {
    const limiter = limiterOnStill(store);
    const joint = await limiter.consumeJointly(['acme', '/reports'], {
      policies: [PER_TENANT, PER_ROUTE],
    });
    expect(joint.allowed).toBe(true);
    expect(joint.policies.map((p) => [p.policy, p.remaining])).toEqual([
      ['tenant', 2],
      ['route', 4],
    ]);
    // The same buckets as each identity's own consume of that policy.
    expect((await limiter.consume('acme', { policies: PER_TENANT })).remaining).toBe(1);
    expect((await limiter.consume('/reports', { policies: PER_ROUTE })).remaining).toBe(3);
    await limiter.close();
  });

  it('consumes from none when any refuses', async () => {
    const limiter = limiterOnStill(store);
    const both = { policies: [PER_TENANT, PER_ROUTE] };
    for (let i = 0; i < 3; i++) {
      expect((await limiter.consumeJointly(['acme', '/a'], both)).allowed).toBe(true);
    }
    // acme is spent: a refusal that leaves the route's budget where it was.
    const refused = await limiter.consumeJointly(['acme', '/b'], both);
    expect(refused.allowed).toBe(false);
    expect(refused.policies.map((p) => p.allowed)).toEqual([false, true]);
    expect((await limiter.peek('/b', { policies: PER_ROUTE })).remaining).toBe(5);
    await limiter.close();
  });

  it('takes policies of one name for different keys, and peeks without consuming', async () => {
    const limiter = limiterOnStill(store);
    const same = { policies: [PER_TENANT, PER_TENANT] };
    const looked = await limiter.peekJointly(['a', 'b'], same);
    expect(looked.policies.map((p) => p.remaining)).toEqual([3, 3]);
    await limiter.consumeJointly(['a', 'b'], same);
    await limiter.consumeJointly(['a', 'c'], same);
    const after = await limiter.peekJointly(['a', 'b'], same);
    expect(after.policies.map((p) => p.remaining)).toEqual([1, 2]);
    await limiter.close();
  });

  it('gives a refund back to every policy, under any of its keys', async () => {
    const limiter = limiterOnStill(store);
    const both = { policies: [PER_TENANT, PER_ROUTE] };
    const decision = await limiter.consumeJointly(['acme', '/a'], both);
    expect(await limiter.refund('/a', { decision })).toBe(true);
    const after = await limiter.peekJointly(['acme', '/a'], both);
    expect(after.policies.map((p) => p.remaining)).toEqual([3, 5]);
    await expect(limiter.refund('other', { decision })).resolves.toBe(false);
    await limiter.close();
  });

  it('rejects keys that are not one per policy, or not strings, with a TypeError', async () => {
    const limiter = limiterOnStill(store);
    await expect(
      limiter.consumeJointly(['a'], { policies: [PER_TENANT, PER_ROUTE] }),
    ).rejects.toThrow(/`keys` has 1 keys for 2 policies/);
    await expect(
      limiter.consumeJointly(['a', 7 as unknown as string], { policies: [PER_TENANT, PER_ROUTE] }),
    ).rejects.toThrow(TypeError);
    await expect(
      limiter.consumeJointly('a' as unknown as string[], { policies: PER_TENANT }),
    ).rejects.toThrow(/`keys` must be an array/);
    await limiter.close();
  });
});

describe('descriptorKey', () => {
  it('spells distinct descriptors apart, whatever their values hold', () => {
    const keys = [
      descriptorKey('api', [{ key: 'a', value: 'b=c' }]),
      descriptorKey('api', [{ key: 'a=b', value: 'c' }]),
      descriptorKey('api', [
        { key: 'a', value: 'b' },
        { key: 'c', value: 'd' },
      ]),
      descriptorKey('api', [{ key: 'a', value: 'b\u001fc=d' }]),
      descriptorKey('api\u001fa', [{ key: 'b', value: 'c' }]),
      descriptorKey('api', [{ key: 'a', value: 'b\\' }]),
    ];
    expect(new Set(keys).size).toBe(keys.length);
  });

  it('is never stored as written: a value may be a credential', () => {
    const key = descriptorKey('api', [{ key: 'api_key', value: 'sk_live_abc' }]);
    expect(storageIdentity(key)).not.toContain('sk_live_abc');
    expect(storageIdentity(key).startsWith('~')).toBe(true);
  });
});
