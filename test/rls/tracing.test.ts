// sentinel-rls's traces, as envoyproxy/ratelimit exports them: the bin in a child process with
// TRACING_ENABLED, sending over OTLP/HTTP and OTLP/gRPC to a local receiver that decodes them;
// the caller's trace continued, upstream's resource and sampling, and nothing sent when off.
import { afterEach, describe, expect, inject, it } from 'vitest';
import { uniquePrefix } from '../harness/clients.ts';
import { freePort } from '../harness/redis-server.ts';
import { type RlsClient, rlsClient } from './grpc-client.ts';
import {
  type OtlpReceiver,
  type ReceivedSpan,
  startConnectionCounter,
  startGrpcReceiver,
  startHttpReceiver,
} from './otlp-receiver.ts';
import { configFile, type RlsProcess, startRls } from './rls-process.ts';

const CONFIG = `
domain: api
descriptors:
  - key: tenant
    rate_limit: { unit: minute, requests_per_unit: 100 }
`;

const SERVER_SPAN = 'envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit';
const EXECUTION_SPAN = 'ShouldRateLimit Execution';
const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT_ID = '00f067aa0ba902b7';

let rls: RlsProcess | undefined;
let client: RlsClient | undefined;
let receiver: OtlpReceiver | undefined;
afterEach(async () => {
  client?.close();
  await rls?.stop();
  await receiver?.close();
  [rls, client, receiver] = [undefined, undefined, undefined];
});

const receivers = { http: startHttpReceiver, grpc: startGrpcReceiver };

/** Starts a receiver of `protocol`, and sentinel-rls tracing to it with `env` on top. */
async function tracedRls(protocol: 'http' | 'grpc', env: Record<string, string> = {}) {
  receiver = await receivers[protocol]();
  rls = await startRls(['--config', configFile(CONFIG)], {
    TRACING_ENABLED: 'true',
    TRACING_EXPORTER_PROTOCOL: protocol,
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
    ...env,
  });
  client = rlsClient(rls.grpcPort);
  return { receiver, client };
}

function ask(metadata: Record<string, string> = {}, tenant = 'a') {
  return client?.shouldRateLimit(
    { domain: 'api', descriptors: [{ entries: [{ key: 'tenant', value: tenant }] }] },
    10_000,
    metadata,
  );
}

/** Stops the service: its SIGTERM exports the spans the batch still holds. */
async function spansAfterStop(): Promise<readonly ReceivedSpan[]> {
  await rls?.stop();
  return receiver?.spans ?? [];
}

const named = (spans: readonly ReceivedSpan[], name: string) =>
  spans.filter((span) => span.name === name);

describe.each(['http', 'grpc'] as const)('TRACING_EXPORTER_PROTOCOL=%s', (protocol) => {
  it("exports upstream's server span and execution span, with the service's resource", async () => {
    await tracedRls(protocol, {
      TRACING_SERVICE_NAME: 'edge-ratelimit',
      TRACING_SERVICE_NAMESPACE: 'mesh',
      TRACING_SERVICE_INSTANCE_ID: 'ratelimit-7d9f-abc12',
      OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=s3cret',
    });
    expect((await ask())?.overall_code).toBe('OK');
    const spans = await spansAfterStop();

    const [server] = named(spans, SERVER_SPAN);
    const [execution] = named(spans, EXECUTION_SPAN);
    expect(spans).toHaveLength(2);
    expect(server).toMatchObject({
      kind: 'SPAN_KIND_SERVER',
      parentSpanId: '',
      status: { code: 'STATUS_CODE_UNSET' },
      attributes: {
        'rpc.system': 'grpc',
        'rpc.service': 'envoy.service.ratelimit.v3.RateLimitService',
        'rpc.method': 'ShouldRateLimit',
        'rpc.grpc.status_code': 0,
        'net.sock.peer.addr': expect.stringMatching(/127\.0\.0\.1$/),
        'net.sock.peer.port': expect.any(Number),
      },
      resource: {
        'service.name': 'edge-ratelimit',
        'service.namespace': 'mesh',
        'service.instance.id': 'ratelimit-7d9f-abc12',
      },
    });
    // The decision's span is the server span's child, in its trace.
    expect(execution).toMatchObject({
      kind: 'SPAN_KIND_INTERNAL',
      traceId: server?.traceId,
      parentSpanId: server?.spanId,
      attributes: { domain: 'api', 'request string': expect.stringContaining('"tenant"') },
    });
    expect(receiver?.exports[0]?.headers['x-api-key']).toBe('s3cret');
  });

  it("continues the caller's W3C trace from the traceparent in the metadata", async () => {
    await tracedRls(protocol);
    await ask({ traceparent: `00-${TRACE_ID}-${PARENT_ID}-01` });
    const spans = await spansAfterStop();
    const [server] = named(spans, SERVER_SPAN);
    expect(server).toMatchObject({ traceId: TRACE_ID, parentSpanId: PARENT_ID });
    expect(named(spans, EXECUTION_SPAN)[0]?.traceId).toBe(TRACE_ID);
  });
});

describe('tracing on Redis', () => {
  it("puts the decision on the execution span, and the Redis call beneath it, from Sentinel's core", async () => {
    await tracedRls('http', { REDIS_URL: inject('redisUrl'), PREFIX: uniquePrefix('rls-trace') });
    expect((await ask())?.overall_code).toBe('OK');
    const spans = await spansAfterStop();
    const [execution] = named(spans, EXECUTION_SPAN);
    expect(execution?.attributes).toMatchObject({
      'sentinel.result': 'allowed',
      'sentinel.algorithm': 'fixed-window',
      'sentinel.remaining': 99,
    });
    const redis = spans.filter((span) => span.kind === 'SPAN_KIND_CLIENT');
    expect(redis).toHaveLength(1);
    expect(redis[0]).toMatchObject({
      traceId: execution?.traceId,
      parentSpanId: execution?.spanId,
      scope: '@sentinel/core',
      attributes: { 'db.system.name': 'redis' },
    });
  });
});

describe('TRACING_SAMPLING_RATE, parent-based as upstream samples', () => {
  it('1 exports every call', async () => {
    await tracedRls('http', { TRACING_SAMPLING_RATE: '1' });
    for (let i = 0; i < 20; i++) await ask({}, `t${i}`);
    const spans = await spansAfterStop();
    expect(named(spans, SERVER_SPAN)).toHaveLength(20);
    expect(new Set(spans.map((span) => span.traceId)).size).toBe(20);
  });

  it("0 exports none of its own traces, and still the caller's sampled one", async () => {
    await tracedRls('http', { TRACING_SAMPLING_RATE: '0' });
    for (let i = 0; i < 20; i++) await ask({}, `t${i}`);
    await ask({ traceparent: `00-${TRACE_ID}-${PARENT_ID}-01` });
    const spans = await spansAfterStop();
    expect(spans.map((span) => span.traceId)).toEqual([TRACE_ID, TRACE_ID]);
  });

  it('1 exports nothing of a trace its caller did not sample', async () => {
    await tracedRls('http', { TRACING_SAMPLING_RATE: '1' });
    await ask({ traceparent: `00-${TRACE_ID}-${PARENT_ID}-00` });
    await ask();
    const spans = await spansAfterStop();
    expect(spans).toHaveLength(2);
    expect(spans.map((span) => span.traceId)).not.toContain(TRACE_ID);
  });
});

describe('the exporter, as the standard OTEL_EXPORTER_OTLP_* variables configure it', () => {
  it('sends to OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as given, path and all', async () => {
    receiver = await startHttpReceiver();
    rls = await startRls(['--config', configFile(CONFIG)], {
      TRACING_ENABLED: 'true',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.endpoint}/collector/traces`,
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'authorization=Bearer abc',
    });
    client = rlsClient(rls.grpcPort);
    await ask();
    const spans = await spansAfterStop();
    expect(spans).toHaveLength(2);
    expect(receiver.exports[0]).toMatchObject({
      path: '/collector/traces',
      headers: { authorization: 'Bearer abc' },
    });
  });

  it('makes the execution span alone, as a root, for a POST /json', async () => {
    await tracedRls('http');
    const response = await fetch(`http://127.0.0.1:${rls?.httpPort}/json`, {
      method: 'POST',
      body: JSON.stringify({
        domain: 'api',
        descriptors: [{ entries: [{ key: 'tenant', value: 'a' }] }],
      }),
    });
    expect(response.status).toBe(200);
    const spans = await spansAfterStop();
    expect(spans).toMatchObject([
      { name: EXECUTION_SPAN, parentSpanId: '', attributes: { domain: 'api' } },
    ]);
  });

  it('continues a B3 trace, as upstream reads B3 beside W3C', async () => {
    await tracedRls('grpc');
    await ask({ 'x-b3-traceid': TRACE_ID, 'x-b3-spanid': PARENT_ID, 'x-b3-sampled': '1' });
    const [server] = named(await spansAfterStop(), SERVER_SPAN);
    expect(server).toMatchObject({ traceId: TRACE_ID, parentSpanId: PARENT_ID });
  });

  it('marks the server span as an error when the call answers UNAVAILABLE', async () => {
    // Nothing listens on the Redis port: every decision degrades, and FAILURE_MODE=error says so.
    await tracedRls('http', {
      REDIS_URL: `127.0.0.1:${await freePort()}`,
      FAILURE_MODE: 'error',
    });
    await expect(ask()).rejects.toMatchObject({ code: 14 });
    const [server] = named(await spansAfterStop(), SERVER_SPAN);
    expect(server).toMatchObject({
      attributes: { 'rpc.grpc.status_code': 14 },
      status: { code: 'STATUS_CODE_ERROR', message: 'the rate limit store is unavailable' },
    });
  });
});

describe('tracing off', () => {
  it('never connects to the OTLP endpoint, and says the OTEL_ variables have no effect', async () => {
    const counter = await startConnectionCounter();
    try {
      rls = await startRls(['--config', configFile(CONFIG)], {
        OTEL_EXPORTER_OTLP_ENDPOINT: counter.endpoint,
        TRACING_SERVICE_NAME: 'edge-ratelimit',
      });
      client = rlsClient(rls.grpcPort);
      for (let i = 0; i < 5; i++) await ask({ traceparent: `00-${TRACE_ID}-${PARENT_ID}-01` });
      const stderr = rls.stderr();
      await rls.stop();
      expect(counter.connections()).toBe(0);
      expect(stderr).toMatch(/have no effect here: .*OTEL_EXPORTER_OTLP_ENDPOINT/);
      expect(stderr).not.toContain('TRACING_SERVICE_NAME');
    } finally {
      await counter.close();
    }
  });
});
