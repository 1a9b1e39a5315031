// ShouldRateLimit and Health over a real gRPC connection, from a client that encodes Envoy's field
// numbers on its own, to a `decide` that echoes what it got: a test of the wire, not of limits.
import {
  type GrpcServer,
  type RateLimitRequestMessage,
  type RateLimitResponseMessage,
  startGrpcServer,
} from '@sentinel/rls';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { grpc, type RlsClient, rlsClient } from './grpc-client.ts';

/** Each descriptor's fields come back in its status; the domain and hits_addend as headers. */
function echo(request: RateLimitRequestMessage): RateLimitResponseMessage {
  return {
    overallCode: request.descriptors.some((d) => d.limit) ? 'OVER_LIMIT' : 'OK',
    statuses: request.descriptors.map((descriptor) => ({
      code: descriptor.limit ? 'OVER_LIMIT' : 'OK',
      currentLimit: descriptor.limit && {
        name: descriptor.entries.map(({ key, value }) => `${key}_${value}`).join('.'),
        ...descriptor.limit,
      },
      limitRemaining: descriptor.hitsAddend,
      durationUntilResetMs: descriptor.limit ? 1_500 : undefined,
    })),
    responseHeadersToAdd: [
      { key: 'x-domain', value: request.domain },
      { key: 'x-hits-addend', value: String(request.hitsAddend) },
    ],
  };
}

let server: GrpcServer;
let client: RlsClient;
const received: RateLimitRequestMessage[] = [];
let answer: (
  request: RateLimitRequestMessage,
  signal: AbortSignal,
) => Promise<RateLimitResponseMessage>;
const errors: unknown[] = [];

beforeAll(async () => {
  server = await startGrpcServer({
    host: '127.0.0.1',
    port: 0,
    decide: (request, { signal }) => {
      received.push(request);
      return answer(request, signal);
    },
    onError: (error) => errors.push(error),
  });
  client = rlsClient(server.port);
});

afterEach(() => {
  received.length = 0;
  errors.length = 0;
  answer = async (request) => echo(request);
  server.setServing(true);
});

afterAll(async () => {
  client.close();
  await server.close();
});

answer = async (request) => echo(request);

describe('ShouldRateLimit', () => {
  it('binds a free port when asked for port 0', () => {
    expect(server.port).toBeGreaterThan(0);
  });

  it('reads the domain, the entries, the limit override and both hits_addends', async () => {
    await client.shouldRateLimit({
      domain: 'edge',
      hits_addend: 3,
      descriptors: [
        {
          entries: [
            { key: 'tenant', value: 'acme' },
            { key: 'path', value: '/login' },
          ],
          limit: { requests_per_unit: 10, unit: 'MINUTE' },
          hits_addend: { value: 0 },
        },
        { entries: [{ key: 'remote_address', value: '10.0.0.1' }], is_negative_hits: true },
      ],
    });
    expect(received).toEqual([
      {
        domain: 'edge',
        hitsAddend: 3,
        descriptors: [
          {
            entries: [
              { key: 'tenant', value: 'acme' },
              { key: 'path', value: '/login' },
            ],
            limit: { requestsPerUnit: 10, unit: 'minute' },
            hitsAddend: 0,
            isNegativeHits: false,
          },
          {
            entries: [{ key: 'remote_address', value: '10.0.0.1' }],
            limit: undefined,
            hitsAddend: undefined,
            isNegativeHits: true,
          },
        ],
      },
    ]);
  });

  it('reads an unset request hits_addend as 0 and a set one as its value', async () => {
    answer = async () => ({ overallCode: 'OK' });
    await client.shouldRateLimit({ domain: 'd', descriptors: [{ entries: [] }] });
    await client.shouldRateLimit({
      domain: 'd',
      descriptors: [{ entries: [], hits_addend: { value: 2 ** 40 } }],
    });
    expect(received.map((r) => [r.hitsAddend, r.descriptors[0]?.hitsAddend])).toEqual([
      [0, undefined],
      [0, 2 ** 40],
    ]);
  });

  it("reads an override's unit by number, as envoyproxy/ratelimit does: 7 is a week", async () => {
    const withUnit = (unit: number) => ({ entries: [], limit: { requests_per_unit: 1, unit } });
    await client.shouldRateLimit({
      domain: 'd',
      descriptors: [
        withUnit(1),
        withUnit(4),
        withUnit(5),
        withUnit(6),
        withUnit(7),
        withUnit(0),
        withUnit(42),
      ],
    });
    expect(received[0]?.descriptors.map((d) => d.limit?.unit)).toEqual([
      'second',
      'day',
      'month',
      'year',
      'week',
      'unknown',
      'unknown',
    ]);
  });

  it('answers overall_code, statuses and response headers at their field numbers', async () => {
    const reply = await client.shouldRateLimit({
      domain: 'edge',
      descriptors: [
        {
          entries: [{ key: 'tenant', value: 'acme' }],
          limit: { requests_per_unit: 10, unit: 'HOUR' },
          hits_addend: { value: 4 },
        },
        { entries: [{ key: 'tenant', value: 'other' }] },
      ],
    });
    expect(reply).toEqual({
      overall_code: 'OVER_LIMIT',
      statuses: [
        {
          code: 'OVER_LIMIT',
          current_limit: { name: 'tenant_acme', requests_per_unit: 10, unit: 'HOUR' },
          limit_remaining: 4,
          duration_until_reset: { seconds: 1, nanos: 500_000_000 },
        },
        // OK, and every other field at its default, so absent from the wire.
        { code: 'OK' },
      ],
      response_headers_to_add: [
        { key: 'x-domain', value: 'edge' },
        { key: 'x-hits-addend', value: '0' },
      ],
    });
  });

  it('answers a week as WEEK (7), and OK with nothing else when there are no descriptors', async () => {
    answer = async () => ({
      overallCode: 'OK',
      statuses: [
        {
          code: 'OK',
          currentLimit: { requestsPerUnit: 5, unit: 'week' },
          limitRemaining: 0,
          durationUntilResetMs: 0,
        },
      ],
    });
    expect(await client.shouldRateLimit({ domain: 'd' })).toEqual({
      overall_code: 'OK',
      statuses: [
        {
          code: 'OK',
          current_limit: { requests_per_unit: 5, unit: 'WEEK' },
          // A Duration of zero is still a Duration: present, and empty.
          duration_until_reset: {},
        },
      ],
    });
    answer = async () => ({ overallCode: 'OK' });
    expect(await client.shouldRateLimit({ domain: 'd' })).toEqual({ overall_code: 'OK' });
  });

  it('answers request headers, the raw body, dynamic metadata and quotas', async () => {
    answer = async () => ({
      overallCode: 'OVER_LIMIT',
      statuses: [{ code: 'OVER_LIMIT', quota: { requests: 2, id: 'q1' } }],
      requestHeadersToAdd: [{ key: 'x-raw', rawValue: Uint8Array.of(0xff, 0) }],
      rawBody: Buffer.from('slow down'),
      dynamicMetadata: {
        tenant: 'acme',
        hits: 3,
        shadow: false,
        gone: null,
        tags: ['a', { b: 1 }],
      },
      quota: { requests: 7, validUntilMs: 1_800_000_000_250 },
    });
    expect(await client.shouldRateLimit({ domain: 'd' })).toEqual({
      overall_code: 'OVER_LIMIT',
      statuses: [{ code: 'OVER_LIMIT', quota: { requests: 2, id: 'q1' } }],
      request_headers_to_add: [{ key: 'x-raw', raw_value: Buffer.of(0xff, 0) }],
      raw_body: Buffer.from('slow down'),
      dynamic_metadata: {
        fields: {
          tenant: { string_value: 'acme' },
          hits: { number_value: 3 },
          shadow: { bool_value: false },
          gone: { null_value: 'NULL_VALUE' },
          tags: {
            list_value: {
              values: [
                { string_value: 'a' },
                { struct_value: { fields: { b: { number_value: 1 } } } },
              ],
            },
          },
        },
      },
      quota: { requests: 7, valid_until: { seconds: 1_800_000_000, nanos: 250_000_000 } },
    });
  });

  it('answers UNKNOWN with the message when decide throws, and serves the next call', async () => {
    answer = async () => {
      throw new Error('the store is down');
    };
    const failed = client.shouldRateLimit({ domain: 'd' });
    await expect(failed).rejects.toMatchObject({
      code: grpc.status.UNKNOWN,
      details: 'the store is down',
    });
    expect(errors).toEqual([new Error('the store is down')]);
    answer = async (request) => echo(request);
    expect(await client.shouldRateLimit({ domain: 'd' })).toMatchObject({ overall_code: 'OK' });
  });

  it('answers UNKNOWN, naming the field, when decide returns what the wire cannot carry', async () => {
    answer = async () => ({ overallCode: 'OK', statuses: [{ code: 'OK', limitRemaining: -1 }] });
    await expect(client.shouldRateLimit({ domain: 'd' })).rejects.toMatchObject({
      code: grpc.status.UNKNOWN,
      details: 'statuses[0].limitRemaining: -1 is not a uint32',
    });
  });

  it("aborts decide's signal when the call's deadline passes", async () => {
    let aborted: Promise<void> | undefined;
    answer = (_request, signal) => {
      aborted = new Promise((resolve) => signal.addEventListener('abort', () => resolve()));
      return new Promise(() => {});
    };
    await expect(client.shouldRateLimit({ domain: 'd' }, 100)).rejects.toMatchObject({
      code: grpc.status.DEADLINE_EXCEEDED,
    });
    await aborted;
  });

  it('refuses a port that is not one at construction', async () => {
    const decide = async () => ({ overallCode: 'OK' as const });
    await expect(startGrpcServer({ port: 70_000, decide })).rejects.toThrow(TypeError);
    await expect(startGrpcServer({ port: 1.5, decide })).rejects.toThrow(TypeError);
  });
});

describe('Health', () => {
  it('answers SERVING for the server, the rate limit service and envoyproxy/ratelimit’s name', async () => {
    for (const service of ['', 'envoy.service.ratelimit.v3.RateLimitService', 'ratelimit']) {
      expect(await client.check(service)).toBe('SERVING');
    }
  });

  it('answers NOT_SERVING after setServing(false), and SERVING again after setServing(true)', async () => {
    server.setServing(false);
    expect(await client.check('')).toBe('NOT_SERVING');
    expect(await client.check('envoy.service.ratelimit.v3.RateLimitService')).toBe('NOT_SERVING');
    server.setServing(true);
    expect(await client.check('')).toBe('SERVING');
  });

  it('answers NOT_FOUND for a service it does not know, as the protocol requires', async () => {
    await expect(client.check('grpc.reflection.v1.ServerReflection')).rejects.toMatchObject({
      code: grpc.status.NOT_FOUND,
    });
  });

  it('tells a watch each change, and an unknown service SERVICE_UNKNOWN', async () => {
    const watch = client.watch('envoy.service.ratelimit.v3.RateLimitService');
    const unknown = client.watch('elsewhere');
    expect(await watch.next()).toBe('SERVING');
    expect(await unknown.next()).toBe('SERVICE_UNKNOWN');
    server.setServing(false);
    expect(await watch.next()).toBe('NOT_SERVING');
    server.setServing(true);
    expect(await watch.next()).toBe('SERVING');
    watch.cancel();
    unknown.cancel();
  });

  it('turns NOT_SERVING on close, ends the watches, and stops', async () => {
    const closing = await startGrpcServer({
      host: '127.0.0.1',
      port: 0,
      decide: async () => ({ overallCode: 'OK' }),
    });
    const other = rlsClient(closing.port);
    const watch = other.watch('');
    expect(await watch.next()).toBe('SERVING');
    await closing.close();
    expect(await watch.next()).toBe('NOT_SERVING');
    expect(await watch.next()).toBe('ENDED');
    await expect(other.check('')).rejects.toMatchObject({ code: grpc.status.UNAVAILABLE });
    other.close();
  });
});
