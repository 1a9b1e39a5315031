// The headers sentinel-rls asks Envoy to add: upstream's three fields, and the draft-11 pair.
import { type HeaderStatus, responseHeaders } from '@sentinel/rls';
import { parseItem, parseList } from 'structured-headers';
import { describe, expect, it } from 'vitest';

function status(overrides: Partial<HeaderStatus>): HeaderStatus {
  return {
    policy: 'api',
    limit: 10,
    remaining: 3,
    windowSeconds: 60,
    resetMs: 41_200,
    overLimit: false,
    ...overrides,
  };
}

const perMinute = status({ policy: 'per-minute', limit: 10, remaining: 7 });
const perSecond = status({
  policy: 'per-second',
  limit: 5,
  remaining: 2,
  windowSeconds: 1,
  resetMs: 400,
});
const perHourOver = status({
  policy: 'per-hour',
  limit: 100,
  remaining: 0,
  windowSeconds: 3_600,
  resetMs: 1_800_000,
  overLimit: true,
});
const perDayOver = status({
  policy: 'per-day',
  limit: 1_000,
  remaining: 0,
  windowSeconds: 86_400,
  resetMs: 36_000_000,
  overLimit: true,
});

describe('legacy, as envoyproxy/ratelimit writes it', () => {
  it('reports the status with the least remaining, the reset in whole seconds rounded up', () => {
    expect(responseHeaders([perMinute, perSecond], 'legacy')).toEqual({
      'RateLimit-Limit': '5',
      'RateLimit-Remaining': '2',
      'RateLimit-Reset': '1',
    });
  });

  it('keeps the first of two with the same least remaining', () => {
    const other = status({ policy: 'other', limit: 50, remaining: 2 });
    expect(responseHeaders([perSecond, other], 'legacy')['RateLimit-Limit']).toBe('5');
    expect(responseHeaders([other, perSecond], 'legacy')['RateLimit-Limit']).toBe('50');
  });

  it('reports a status over its limit, the last of several, whatever the others have left', () => {
    const empty = status({ policy: 'empty', limit: 3, remaining: 0 });
    expect(responseHeaders([perHourOver, empty], 'legacy')['RateLimit-Limit']).toBe('100');
    expect(responseHeaders([perHourOver, perDayOver, perSecond], 'legacy')).toEqual({
      'RateLimit-Limit': '1000',
      'RateLimit-Remaining': '0',
      'RateLimit-Reset': '36000',
    });
  });

  it('writes the names LIMIT_LIMIT_HEADER and its siblings give', () => {
    const names = { limit: 'X-Limit', remaining: 'X-Left', reset: 'X-Reset' };
    expect(Object.keys(responseHeaders([perMinute], 'legacy', names))).toEqual([
      'X-Limit',
      'X-Left',
      'X-Reset',
    ]);
  });

  it('writes nothing when no descriptor matched a limit', () => {
    expect(responseHeaders([], 'legacy')).toEqual({});
  });

  it('writes integers only', () => {
    for (const value of Object.values(responseHeaders([perMinute, perHourOver], 'legacy'))) {
      expect(value).toMatch(/^\d+$/);
    }
  });
});

describe('draft-11', () => {
  it('lists every limit as a policy and reports the one with the least remaining', () => {
    expect(responseHeaders([perMinute, perSecond], 'draft')).toEqual({
      'RateLimit-Policy': '"per-minute";q=10;w=60, "per-second";q=5;w=1',
      RateLimit: '"per-second";r=2;t=1',
    });
  });

  it('reports the limit over its limit that resets last, wherever it stands in the request', () => {
    for (const statuses of [
      [perDayOver, perHourOver, perSecond],
      [perSecond, perHourOver, perDayOver],
    ]) {
      expect(responseHeaders(statuses, 'draft').RateLimit).toBe('"per-day";r=0;t=36000');
    }
  });

  it('parses as the draft says: a list of string items with integer q and w, and one item', () => {
    const headers = responseHeaders([perMinute, perHourOver, perSecond], 'draft');
    const policies = parseList(headers['RateLimit-Policy'] as string);
    expect(policies.map(([name, params]) => [name, Object.fromEntries(params)])).toEqual([
      ['per-minute', { q: 10, w: 60 }],
      ['per-hour', { q: 100, w: 3_600 }],
      ['per-second', { q: 5, w: 1 }],
    ]);
    const [name, params] = parseItem(headers.RateLimit as string);
    expect([name, Object.fromEntries(params)]).toEqual(['per-hour', { r: 0, t: 1_800 }]);
  });

  it('escapes a policy name that holds quotes or backslashes', () => {
    const odd = status({ policy: 'domain.key_"q"\\x' });
    const headers = responseHeaders([odd], 'draft');
    expect(parseList(headers['RateLimit-Policy'] as string)[0]?.[0]).toBe('domain.key_"q"\\x');
    expect(parseItem(headers.RateLimit as string)[0]).toBe('domain.key_"q"\\x');
  });

  it('writes nothing when no descriptor matched a limit', () => {
    expect(responseHeaders([], 'draft')).toEqual({});
  });
});
