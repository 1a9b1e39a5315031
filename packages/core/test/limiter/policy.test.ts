// Policies resolved at construction: each error names the field as the user wrote it.
import { describe, expect, it } from 'vitest';
import { resolvePlan } from '../../src/limiter/policy.ts';
import type { PolicyOptions } from '../../src/shared/types.ts';

const bad = (input: unknown, option: string) => () => resolvePlan(input as PolicyOptions, option);

describe('resolvePlan', () => {
  it.each([
    ['limit', { limit: 0, window: '1m' }],
    ['window', { limit: 1, window: 'soon' }],
    ['algorithm', { limit: 1, window: '1m', algorithm: 'leaky' }],
    ['name', { limit: 1, window: '1m', name: 'no spaces' }],
  ])('names the shorthand field `%s` bare', (field, input) => {
    expect(bad(input, '')).toThrow(TypeError);
    expect(bad(input, '')).toThrow(`\`${field}\``);
    expect(bad(input, 'tiers.PRO')).toThrow(`\`tiers.PRO.${field}\``);
    expect(bad([input], 'policies')).toThrow(`\`policies[0].${field}\``);
  });

  it('refuses a rate quota whose full bucket passes 2^53 units in any step, naming the limit', () => {
    // 999,999,937 is prime, and a window one ms over 365 days divides into no coarser step.
    const prime = { limit: 999_999_937, window: 365 * 86_400_000 + 1, algorithm: 'gcra' };
    expect(bad(prime, '')).toThrow(/`limit` of 999999937 .* gcra/);
    // Over exactly 365 days, it counts time in minutes.
    expect(() => resolvePlan({ ...prime, window: '365d' } as PolicyOptions, '')).not.toThrow();
  });

  it('bounds the sliding-window-counter below 2^44', () => {
    const counter = { window: '1m', algorithm: 'sliding-window-counter' };
    expect(bad({ ...counter, limit: 2 ** 44 }, '')).toThrow('`limit` must be below 2^44');
    expect(() =>
      resolvePlan({ ...counter, limit: 2 ** 44 - 1 } as PolicyOptions, ''),
    ).not.toThrow();
  });

  it('accepts fixed-window quotas of any safe size', () => {
    const policy = { limit: Number.MAX_SAFE_INTEGER, window: '365d', algorithm: 'fixed-window' };
    expect(resolvePlan(policy as PolicyOptions, '').policies[0]?.limit).toBe(
      Number.MAX_SAFE_INTEGER,
    );
  });
});
