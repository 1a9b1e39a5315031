// ShouldRateLimit in proto3 JSON, for the `/json` endpoint: read and written as
// envoyproxy/ratelimit's protojson reads and writes it.
import {
  httpStatusOf,
  type RateLimitRequestMessage,
  RequestJsonError,
  requestFromJson,
  responseToJson,
} from '@sentinel/rls';
import { describe, expect, it } from 'vitest';

const REQUEST: RateLimitRequestMessage = {
  domain: 'edge',
  hitsAddend: 2,
  descriptors: [
    {
      entries: [
        { key: 'tenant', value: 'acme' },
        { key: 'path', value: '/login' },
      ],
      limit: { requestsPerUnit: 10, unit: 'minute' },
      hitsAddend: 0,
      isNegativeHits: true,
    },
    {
      entries: [{ key: 'remote_address', value: '10.0.0.1' }],
      limit: undefined,
      hitsAddend: undefined,
      isNegativeHits: false,
    },
  ],
};

/** The first error `read` throws. */
function failure(read: () => unknown): unknown {
  try {
    read();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

describe('requestFromJson', () => {
  it('reads lowerCamelCase names', () => {
    const body = {
      domain: 'edge',
      hitsAddend: 2,
      descriptors: [
        {
          entries: [
            { key: 'tenant', value: 'acme' },
            { key: 'path', value: '/login' },
          ],
          limit: { requestsPerUnit: 10, unit: 'MINUTE' },
          hitsAddend: 0,
          isNegativeHits: true,
        },
        { entries: [{ key: 'remote_address', value: '10.0.0.1' }] },
      ],
    };
    expect(requestFromJson(body)).toEqual(REQUEST);
  });

  it("reads the .proto's snake_case names, quoted integers and enums by number", () => {
    const body = {
      domain: 'edge',
      hits_addend: '2',
      descriptors: [
        {
          entries: [
            { key: 'tenant', value: 'acme' },
            { key: 'path', value: '/login' },
          ],
          limit: { requests_per_unit: '1e1', unit: 2 },
          hits_addend: '0',
          is_negative_hits: true,
        },
        { entries: [{ key: 'remote_address', value: '10.0.0.1' }], limit: null, hits_addend: null },
      ],
    };
    expect(requestFromJson(body)).toEqual(REQUEST);
  });

  it('reads an absent or null field as its default', () => {
    expect(requestFromJson({})).toEqual({ domain: '', descriptors: [], hitsAddend: 0 });
    expect(requestFromJson({ domain: null, descriptors: null, hits_addend: null })).toEqual({
      domain: '',
      descriptors: [],
      hitsAddend: 0,
    });
  });

  it("reads an override's unit 7 as a week, and an unknown number as unknown", () => {
    const unit = (value: unknown) =>
      requestFromJson({ descriptors: [{ limit: { unit: value } }] }).descriptors[0]?.limit?.unit;
    expect([unit('SECOND'), unit('YEAR'), unit(7), unit('UNKNOWN'), unit(99)]).toEqual([
      'second',
      'year',
      'week',
      'unknown',
      'unknown',
    ]);
  });

  it.each([
    ['a body that is not an object', [], '', 'expected an object, got an array'],
    ['null for the body', null, '', 'expected an object, got null'],
    ['an unknown field', { domain: 'd', tenant: 'x' }, 'tenant', 'unknown field'],
    ['both spellings of one field', { hitsAddend: 1, hits_addend: 1 }, 'hits_addend', 'twice'],
    ['a number for a string', { domain: 5 }, 'domain', 'expected a string, got 5'],
    ['a negative uint32', { hitsAddend: -1 }, 'hitsAddend', 'unsigned integer, got -1'],
    ['a fraction', { hitsAddend: 1.5 }, 'hitsAddend', 'unsigned integer, got 1.5'],
    ['a uint32 past its range', { hitsAddend: 2 ** 32 }, 'hitsAddend', 'unsigned integer'],
    ['a quoted non-number', { hitsAddend: ' 1' }, 'hitsAddend', 'unsigned integer, got " 1"'],
    ['an object for a list', { descriptors: {} }, 'descriptors', 'expected an array'],
    [
      'a string for a boolean',
      { descriptors: [{ isNegativeHits: 'true' }] },
      'descriptors[0].isNegativeHits',
      'expected a boolean',
    ],
    [
      'a unit name envoy.type.v3 lacks',
      { descriptors: [{ limit: { unit: 'WEEK' } }] },
      'descriptors[0].limit.unit',
      '"WEEK" is not an envoy.type.v3.RateLimitUnit',
    ],
    [
      'a quoted enum number',
      { descriptors: [{ limit: { unit: '2' } }] },
      'descriptors[0].limit.unit',
      'is not an envoy.type.v3.RateLimitUnit',
    ],
    [
      'an unknown field of an entry',
      { descriptors: [{ entries: [{ key: 'k', val: 'v' }] }] },
      'descriptors[0].entries[0].val',
      'unknown field',
    ],
  ])('refuses %s, naming where', (_case, body, field, problem) => {
    const error = failure(() => requestFromJson(body));
    expect(error).toBeInstanceOf(RequestJsonError);
    expect(error).toMatchObject({ field, message: expect.stringContaining(problem) });
  });
});

describe('responseToJson', () => {
  it('writes lowerCamelCase, enums by name, uint32 as numbers and durations as seconds', () => {
    const json = responseToJson({
      overallCode: 'OVER_LIMIT',
      statuses: [
        {
          code: 'OVER_LIMIT',
          currentLimit: { name: 'login', requestsPerUnit: 10, unit: 'week' },
          limitRemaining: 0,
          durationUntilResetMs: 1_500,
        },
        {
          code: 'OK',
          currentLimit: { requestsPerUnit: 100, unit: 'second' },
          limitRemaining: 99,
          durationUntilResetMs: 250,
        },
        { code: 'OK' },
      ],
      responseHeadersToAdd: [{ key: 'RateLimit-Remaining', value: '0' }],
    });
    expect(JSON.stringify(json)).toBe(
      JSON.stringify({
        overallCode: 'OVER_LIMIT',
        statuses: [
          {
            code: 'OVER_LIMIT',
            currentLimit: { name: 'login', requestsPerUnit: 10, unit: 'WEEK' },
            durationUntilReset: '1.500s',
          },
          {
            code: 'OK',
            currentLimit: { requestsPerUnit: 100, unit: 'SECOND' },
            limitRemaining: 99,
            durationUntilReset: '0.250s',
          },
          { code: 'OK' },
        ],
        responseHeadersToAdd: [{ key: 'RateLimit-Remaining', value: '0' }],
      }),
    );
  });

  it.each([
    [0, '0s'],
    [60_000, '60s'],
    [1, '0.001s'],
    [0.001, '0.000001s'],
    [0.0000015, '0.000000002s'],
    [-1_500, '-1.500s'],
  ])('writes a Duration of %s ms as "%s"', (ms, text) => {
    const json = responseToJson({
      overallCode: 'OK',
      statuses: [{ code: 'OK', durationUntilResetMs: ms }],
    });
    expect(json.statuses).toEqual([{ code: 'OK', durationUntilReset: text }]);
  });

  it('leaves out every field at its default, UNKNOWN codes and units included', () => {
    expect(
      responseToJson({
        overallCode: 'UNKNOWN',
        statuses: [],
        responseHeadersToAdd: [],
        rawBody: new Uint8Array(0),
      }),
    ).toEqual({});
    expect(
      responseToJson({
        overallCode: 'OK',
        statuses: [
          { code: 'UNKNOWN', currentLimit: { name: '', requestsPerUnit: 0, unit: 'unknown' } },
        ],
      }),
    ).toEqual({ overallCode: 'OK', statuses: [{ currentLimit: {} }] });
  });

  it('writes bytes in base64, metadata as its object, and quota timestamps in RFC 3339', () => {
    expect(
      responseToJson({
        overallCode: 'OVER_LIMIT',
        requestHeadersToAdd: [{ key: 'x-raw', rawValue: Uint8Array.of(0xff, 0xfe) }],
        rawBody: Buffer.from('slow down'),
        dynamicMetadata: { tenant: 'acme', hits: 3, tags: ['a', null], gone: undefined as never },
        quota: { requests: 5, validUntilMs: 1_800_000_000_250, id: 'q' },
        statuses: [{ code: 'OK', quota: { requests: 1, validUntilMs: 0 } }],
      }),
    ).toEqual({
      overallCode: 'OVER_LIMIT',
      statuses: [{ code: 'OK', quota: { requests: 1, validUntil: '1970-01-01T00:00:00Z' } }],
      requestHeadersToAdd: [{ key: 'x-raw', rawValue: '//4=' }],
      rawBody: 'c2xvdyBkb3du',
      dynamicMetadata: { tenant: 'acme', hits: 3, tags: ['a', null] },
      quota: { requests: 5, validUntil: '2027-01-15T08:00:00.250Z', id: 'q' },
    });
  });

  it('refuses a value its field cannot hold, naming the field', () => {
    expect(() =>
      responseToJson({ overallCode: 'OK', statuses: [{ code: 'OK', limitRemaining: 2 ** 32 }] }),
    ).toThrow(new TypeError('statuses[0].limitRemaining: 4294967296 is not a uint32'));
    expect(() => responseToJson({ overallCode: 'MAYBE' as never })).toThrow(
      new TypeError('overallCode: MAYBE is not a Code'),
    );
    expect(() =>
      responseToJson({ overallCode: 'OK', dynamicMetadata: { ratio: Number.NaN } }),
    ).toThrow(new TypeError('dynamicMetadata.ratio: NaN is not a JSON value'));
  });

  it('round-trips a request into the response an echoing service builds', () => {
    const request = requestFromJson({
      domain: 'edge',
      descriptors: [
        { entries: [{ key: 'k', value: 'v' }], limit: { requests_per_unit: 3, unit: 'HOUR' } },
      ],
    });
    const json = responseToJson({
      overallCode: 'OK',
      statuses: request.descriptors.map((d) => ({
        code: 'OK' as const,
        currentLimit: d.limit && { name: request.domain, ...d.limit },
        limitRemaining: 2,
        durationUntilResetMs: 3_600_000,
      })),
    });
    expect(json).toEqual({
      overallCode: 'OK',
      statuses: [
        {
          code: 'OK',
          currentLimit: { name: 'edge', requestsPerUnit: 3, unit: 'HOUR' },
          limitRemaining: 2,
          durationUntilReset: '3600s',
        },
      ],
    });
  });
});

describe('httpStatusOf', () => {
  it('answers 429 over the limit, 500 for UNKNOWN and 200 for OK, as envoyproxy/ratelimit', () => {
    expect(httpStatusOf({ overallCode: 'OVER_LIMIT' })).toBe(429);
    expect(httpStatusOf({ overallCode: 'UNKNOWN' })).toBe(500);
    expect(httpStatusOf({ overallCode: 'OK' })).toBe(200);
  });
});
