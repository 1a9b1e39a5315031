// Header formats as pure functions: exact strings per draft, combinations, and Retry-After rounding.
import { parseList } from 'structured-headers';
import { describe, expect, it } from 'vitest';
import { resolveHeaderFormats, sfString } from '../../src/http/headers.ts';
import {
  type Decision,
  draft6Headers,
  draft7Headers,
  draft11Headers,
  legacyHeaders,
  type PolicyDecision,
  rateLimitHeaders,
  retryAfterSeconds,
} from '../../src/index.ts';

function policy(overrides: Partial<PolicyDecision>): PolicyDecision {
  return {
    policy: 'free-minute',
    algorithm: 'token-bucket',
    allowed: true,
    limit: 10,
    windowMs: 60_000,
    remaining: 3,
    resetMs: 41_200,
    retryAfterMs: 0,
    ...overrides,
  };
}

const minute = policy({});
const burst = policy({
  policy: 'pro-burst',
  limit: 20,
  windowMs: 1_000,
  remaining: 0,
  resetMs: 950,
  allowed: false,
  retryAfterMs: 50,
});
const single: Decision = {
  allowed: true,
  limit: 10,
  remaining: 3,
  resetMs: 41_200,
  retryAfterMs: 0,
  policy: 'free-minute',
  policies: [minute],
};
const several: Decision = {
  allowed: false,
  limit: 20,
  remaining: 0,
  resetMs: 950,
  retryAfterMs: 50,
  policy: 'pro-burst',
  policies: [minute, burst],
};

describe('draft-11', () => {
  it('names the policy, its quota and window, and the state of the most restrictive one', () => {
    expect(draft11Headers(single)).toEqual({
      'RateLimit-Policy': '"free-minute";q=10;w=60',
      RateLimit: '"free-minute";r=3;t=42',
    });
  });

  it('lists every policy and reports the most restrictive', () => {
    const headers = draft11Headers(several);
    expect(headers['RateLimit-Policy']).toBe('"free-minute";q=10;w=60, "pro-burst";q=20;w=1');
    expect(headers.RateLimit).toBe('"pro-burst";r=0;t=1');
  });

  it('parses as structured-field lists of strings with integer parameters', () => {
    const headers = draft11Headers(several);
    const policies = parseList(headers['RateLimit-Policy'] as string);
    expect(policies.map(([name, params]) => [name, Object.fromEntries(params)])).toEqual([
      ['free-minute', { q: 10, w: 60 }],
      ['pro-burst', { q: 20, w: 1 }],
    ]);
    const [[name, params]] = parseList(headers.RateLimit as string) as [
      [string, Map<string, number>],
    ];
    expect([name, Object.fromEntries(params)]).toEqual(['pro-burst', { r: 0, t: 1 }]);
  });

  it('escapes what a structured string cannot hold', () => {
    expect(sfString('a"b\\c\ndé')).toBe('"a\\"b\\\\cd"');
    expect(parseList(`${sfString('a"b\\c')};q=1`)[0]?.[0]).toBe('a"b\\c');
  });
});

// Items are kept by policy name between responses: one name with another limit or window,
// as two limiters or an identify's own policies may have, must not get the first one's.
it('describes each policy by its own quota and window, whatever came before by that name', () => {
  const wider = policy({ limit: 100, windowMs: 3_600_000, remaining: 99, resetMs: 36_000 });
  const decision = (p: PolicyDecision): Decision => ({ ...single, limit: p.limit, policies: [p] });
  expect(draft11Headers(decision(minute))['RateLimit-Policy']).toBe('"free-minute";q=10;w=60');
  expect(draft11Headers(decision(wider))['RateLimit-Policy']).toBe('"free-minute";q=100;w=3600');
  expect(draft11Headers(decision(policy({ windowMs: 1_000 })))['RateLimit-Policy']).toBe(
    '"free-minute";q=10;w=1',
  );
  expect(draft11Headers(decision(minute))['RateLimit-Policy']).toBe('"free-minute";q=10;w=60');
  for (let i = 0; i < 3_000; i++) {
    const many = policy({ policy: `p${i}`, limit: i + 1 });
    expect(draft11Headers(decision(many))['RateLimit-Policy']).toBe(`"p${i}";q=${i + 1};w=60`);
  }
  expect(draft11Headers({ ...several, policy: 'pro-burst' }).RateLimit).toBe('"pro-burst";r=0;t=1');
});

describe('older formats', () => {
  it('draft-7 sends one RateLimit dictionary and the policy', () => {
    expect(draft7Headers(single)).toEqual({
      'RateLimit-Policy': '10;w=60',
      RateLimit: 'limit=10, remaining=3, reset=42',
    });
  });

  it('draft-6 sends separate fields', () => {
    expect(draft6Headers(several)).toEqual({
      'RateLimit-Policy': '10;w=60, 20;w=1',
      'RateLimit-Limit': '20',
      'RateLimit-Remaining': '0',
      'RateLimit-Reset': '1',
    });
  });

  it('legacy sends X-RateLimit-* with the reset as a Unix time in seconds', () => {
    expect(legacyHeaders(single, 1_700_000_000_500)).toEqual({
      'X-RateLimit-Limit': '10',
      'X-RateLimit-Remaining': '3',
      'X-RateLimit-Reset': String(Math.ceil((1_700_000_000_500 + 41_200) / 1000)),
    });
  });

  it('take the reset time from the clock they are given', () => {
    const at = Date.UTC(2030, 0, 1);
    const headers = rateLimitHeaders(single, ['draft-11', 'legacy'], at);
    expect(headers['X-RateLimit-Reset']).toBe(String(Math.ceil((at + 41_200) / 1000)));
  });

  it('combine with legacy, or send nothing for false', () => {
    const headers = rateLimitHeaders(single, resolveHeaderFormats(['draft-11', 'legacy']));
    expect(Object.keys(headers).sort()).toEqual([
      'RateLimit',
      'RateLimit-Policy',
      'X-RateLimit-Limit',
      'X-RateLimit-Remaining',
      'X-RateLimit-Reset',
    ]);
    expect(resolveHeaderFormats(false)).toEqual([]);
  });

  it.each([[['draft-11', 'draft-7']], [['draft-6', 'draft-11', 'legacy']], ['draft-12'], [true]])(
    'refuse %j at construction',
    (option) => {
      expect(() => resolveHeaderFormats(option)).toThrow(TypeError);
      expect(() => resolveHeaderFormats(option)).toThrow(/`headers`/);
    },
  );
});

describe('a decision that does not know the state', () => {
  // What the failure mode answers without a store: the numbers are placeholders.
  const unknown: Decision = { ...single, remaining: 10, resetMs: 0, degraded: 'allow' };
  const ALL = ['draft-11', 'draft-7', 'draft-6', 'legacy'] as const;

  it.each([
    ['draft-11', { 'RateLimit-Policy': '"free-minute";q=10;w=60' }],
    ['draft-7', { 'RateLimit-Policy': '10;w=60' }],
    ['draft-6', { 'RateLimit-Policy': '10;w=60', 'RateLimit-Limit': '10' }],
    ['legacy', { 'X-RateLimit-Limit': '10' }],
  ] as const)('keeps only the policy in %s', (format, expected) => {
    expect(rateLimitHeaders(unknown, [format], 1_700_000_000_000)).toEqual(expected);
    expect(rateLimitHeaders({ ...unknown, allowed: false, degraded: 'deny' }, [format])).toEqual(
      expected,
    );
  });

  it('is not one the local fallback made, whose state is real', () => {
    for (const format of ALL) {
      const local = { ...single, degraded: 'local' as const };
      expect(rateLimitHeaders(local, [format], 0)).toEqual(rateLimitHeaders(single, [format], 0));
    }
  });
});

describe('Retry-After', () => {
  it.each([
    [1, 1],
    [999, 1],
    [1_000, 1],
    [1_001, 2],
    [59_999, 60],
  ])('is %d ms rounded up to %d s', (ms, seconds) => {
    expect(retryAfterSeconds({ ...several, retryAfterMs: ms })).toBe(seconds);
  });

  it('is absent for a cost no policy can ever admit, since no wait helps', () => {
    const never = { ...several, retryAfterMs: Number.POSITIVE_INFINITY };
    expect(retryAfterSeconds(never)).toBeUndefined();
  });
});
