// sentinel-rls's statistics over OTLP: the bin with OTEL_METRICS_EXPORTER=otlp, exporting over
// OTLP/HTTP and OTLP/gRPC to a local receiver that decodes them. The same counts as /metrics,
// under upstream's names with their variable parts as attributes, with @sentinel/core's beside
// them; periodic while it runs, last at SIGTERM, and nothing without the variable.
import { readFileSync } from 'node:fs';
import { TIME_BUCKETS } from '@sentinel/rls';
import { afterEach, describe, expect, it } from 'vitest';
import { parseExposition } from './exposition.ts';
import { type RlsClient, rlsClient } from './grpc-client.ts';
import {
  type OtlpReceiver,
  type ReceivedMetric,
  startGrpcReceiver,
  startHttpReceiver,
} from './otlp-receiver.ts';
import { awayFromMinuteEdge, configFile, type RlsProcess, startRls } from './rls-process.ts';

// Stat keys api.tenant (domain and key1) and api.route.method (with key2).
const CONFIG = `
domain: api
descriptors:
  - key: tenant
    rate_limit: { unit: minute, requests_per_unit: 10 }
  - key: route
    descriptors:
      - key: method
        rate_limit: { unit: minute, requests_per_unit: 100 }
`;

const STATS = ['total_hits', 'over_limit', 'near_limit', 'within_limit', 'shadow_mode'] as const;
const { version } = JSON.parse(
  readFileSync(new URL('../../packages/rls/package.json', import.meta.url), 'utf8'),
) as { version: string };

let rls: RlsProcess | undefined;
let client: RlsClient | undefined;
let receiver: OtlpReceiver | undefined;
afterEach(async () => {
  client?.close();
  await rls?.stop();
  await receiver?.close();
  [rls, client, receiver] = [undefined, undefined, undefined];
});

const receivers = { 'http/protobuf': startHttpReceiver, grpc: startGrpcReceiver };

async function exportingRls(protocol: keyof typeof receivers, env: Record<string, string> = {}) {
  receiver = await receivers[protocol]();
  rls = await startRls(['--config', configFile(CONFIG)], {
    OTEL_METRICS_EXPORTER: 'otlp',
    OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: protocol,
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
    ...env,
  });
  client = rlsClient(rls.grpcPort);
  return receiver;
}

const tenant = (value: string) => ({ entries: [{ key: 'tenant', value }] });
const route = (path: string, method: string) => ({
  entries: [
    { key: 'route', value: path },
    { key: 'method', value: method },
  ],
});

async function ask(descriptor: ReturnType<typeof tenant>, domain = 'api') {
  return client?.shouldRateLimit({ domain, descriptors: [descriptor] }, 10_000);
}

/** The last export's metrics: each is cumulative, so the last holds every count. */
function lastExport(held: OtlpReceiver): readonly ReceivedMetric[] {
  const last = held.metricExports.at(-1);
  if (last === undefined) throw new Error('no metrics were exported');
  return last;
}

function metric(metrics: readonly ReceivedMetric[], name: string): ReceivedMetric {
  const found = metrics.find((m) => m.name === name);
  if (found === undefined) throw new Error(`${name} was not exported`);
  return found;
}

/** A point's value, by its attributes in any order. */
function valueAt(found: ReceivedMetric, attributes: Record<string, unknown>): number | undefined {
  const key = JSON.stringify(Object.entries(attributes).sort());
  return found.points.find((p) => JSON.stringify(Object.entries(p.attributes).sort()) === key)
    ?.value;
}

describe.each(['http/protobuf', 'grpc'] as const)(
  'OTEL_EXPORTER_OTLP_METRICS_PROTOCOL=%s',
  (protocol) => {
    it("exports the counts /metrics serves, under upstream's names, and the core's beside them", async () => {
      const held = await exportingRls(protocol);
      // Ten a minute: the twelve calls must fall in one minute for two to be over the limit.
      await awayFromMinuteEdge();
      const answers = [];
      for (let i = 0; i < 12; i++) answers.push((await ask(tenant('a')))?.overall_code);
      for (let i = 0; i < 3; i++) await ask(route('/orders', 'GET'));
      await expect(ask(tenant('a'), '')).rejects.toThrow(/domain must not be empty/);
      expect(answers.filter((code) => code === 'OVER_LIMIT')).toHaveLength(2);
      const text = await (await fetch(`http://127.0.0.1:${rls?.httpPort}/metrics`)).text();
      // SIGTERM: the provider's shutdown exports a last time.
      await rls?.stop();
      const metrics = lastExport(held);
      const samples = parseExposition(text);
      const sample = (name: string, labels: Record<string, string> = {}): number => {
        const key = JSON.stringify(Object.entries(labels).sort());
        const found = samples.find(
          (s) => s.name === name && JSON.stringify(Object.entries(s.labels).sort()) === key,
        );
        if (found === undefined) throw new Error(`/metrics has no ${name} ${key}`);
        return found.value;
      };

      for (const stat of STATS) {
        const exported = metric(metrics, `ratelimit.service.rate_limit.${stat}`);
        expect(exported).toMatchObject({
          type: 'sum',
          monotonic: true,
          temporality: 'AGGREGATION_TEMPORALITY_CUMULATIVE',
          unit: '{hit}',
          scope: '@sentinel/rls',
          scopeVersion: version,
          resource: { 'service.name': 'RateLimit' },
        });
        // Every series of /metrics, by the same labels and with the same count, and no other.
        const series = samples.filter((s) => s.name === `ratelimit_service_rate_limit_${stat}`);
        expect(series).toHaveLength(2);
        expect(exported.points).toHaveLength(series.length);
        for (const { labels, value } of series) expect(valueAt(exported, labels)).toBe(value);
      }
      const hitsOf = (stat: string, attributes: Record<string, string>) =>
        valueAt(metric(metrics, `ratelimit.service.rate_limit.${stat}`), attributes);
      const tenantSeries = { domain: 'api', key1: 'tenant' };
      expect(hitsOf('total_hits', tenantSeries)).toBe(12);
      expect(hitsOf('over_limit', tenantSeries)).toBe(2);
      expect(hitsOf('within_limit', tenantSeries)).toBe(10);
      expect(hitsOf('total_hits', { domain: 'api', key1: 'route', key2: 'method' })).toBe(3);

      const requests = metric(metrics, 'ratelimit_server.total_requests');
      expect(valueAt(requests, { grpc_method: 'ShouldRateLimit' })).toBe(16);
      expect(sample('ratelimit_service_total_requests', { grpc_method: 'ShouldRateLimit' })).toBe(
        16,
      );
      const errors = metric(metrics, 'ratelimit.service.call.should_rate_limit');
      expect(valueAt(errors, { err_type: 'service_error' })).toBe(1);
      expect(
        sample('ratelimit_service_should_rate_limit_error', { err_type: 'service_error' }),
      ).toBe(1);
      expect(metric(metrics, 'ratelimit.service.global_shadow_mode').points[0]?.value).toBe(0);
      expect(metric(metrics, 'sentinel.rls.store.errors').points[0]?.value).toBe(0);

      const responseTime = metric(metrics, 'ratelimit_server.response_time');
      expect(responseTime).toMatchObject({ type: 'histogram', unit: 's' });
      expect(responseTime.points).toMatchObject([
        { attributes: { grpc_method: 'ShouldRateLimit' }, count: 16, bounds: TIME_BUCKETS },
      ]);
      expect(responseTime.points[0]?.sum).toBeGreaterThan(0);

      // The limiter's own instruments, through the provider the service registered.
      const decisions = metric(metrics, 'sentinel.decisions');
      expect(decisions.scope).toBe('@sentinel/core');
      const byResult = (result: string) =>
        decisions.points
          .filter((p) => p.attributes['sentinel.result'] === result)
          .reduce((sum, p) => sum + (p.value ?? 0), 0);
      expect(byResult('allowed')).toBe(13);
      expect(byResult('limited')).toBe(2);
    });
  },
);

describe('OTEL_METRIC_EXPORT_INTERVAL', () => {
  it('exports on the interval while the service runs, the counts growing', async () => {
    const held = await exportingRls('http/protobuf', { OTEL_METRIC_EXPORT_INTERVAL: '200' });
    await ask(tenant('a'));
    const first = await eventually(() => hits(held) === 1);
    await ask(tenant('a'));
    await eventually(() => hits(held) === 2);
    expect(first).toBeLessThan(held.metricExports.length);
    expect(held.exports.every((e) => e.path === '/v1/metrics')).toBe(true);
  });
});

describe('OTEL_METRICS_EXPORTER unset', () => {
  it('exports spans with tracing on, and no metrics', async () => {
    receiver = await startHttpReceiver();
    rls = await startRls(['--config', configFile(CONFIG)], {
      TRACING_ENABLED: 'true',
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      OTEL_METRIC_EXPORT_INTERVAL: '100',
    });
    client = rlsClient(rls.grpcPort);
    await ask(tenant('a'));
    await rls.stop();
    expect(receiver.spans.length).toBeGreaterThan(0);
    expect(receiver.metricExports).toEqual([]);
  });
});

/** total_hits of api.tenant in the last export so far, or 0. */
function hits(held: OtlpReceiver): number {
  const last = held.metricExports.at(-1);
  const found = last?.find((m) => m.name === 'ratelimit.service.rate_limit.total_hits');
  return found?.points[0]?.value ?? 0;
}

/** Waits up to 10 s for `done`, and returns how many exports had come by then. */
async function eventually(done: () => boolean): Promise<number> {
  const deadline = Date.now() + 10_000;
  while (!done()) {
    if (Date.now() > deadline) throw new Error('timed out waiting for an export');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return receiver?.metricExports.length ?? 0;
}
