// The gateway with OTEL_EXPORTER_OTLP_ENDPOINT: traces and metrics over OTLP to a local receiver
// that decodes what it gets, each request a server span carrying its decision.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { uniquePrefix } from '../harness/clients.ts';
import { configFile, startGateway } from './gateway-process.ts';

const FREE = { 'x-api-key': 'demo-free-key' };

/** An OTLP/HTTP attribute, as the JSON encoding writes it. */
interface KeyValue {
  key: string;
  value: { stringValue?: string; intValue?: string | number; doubleValue?: number };
}

interface ReceivedSpan {
  name: string;
  kind: number;
  traceId: string;
  attributes: Record<string, unknown>;
  events: string[];
  service: unknown;
}

function attributesOf(list: readonly KeyValue[] = []): Record<string, unknown> {
  return Object.fromEntries(
    list.map(({ key, value }) => [
      key,
      value.stringValue ??
        (value.intValue === undefined ? value.doubleValue : Number(value.intValue)),
    ]),
  );
}

/** A receiver of OTLP/HTTP in its JSON encoding, on /v1/traces and /v1/metrics. */
async function otlpReceiver() {
  const spans: ReceivedSpan[] = [];
  /** The last value exported of each metric point, by metric and attributes. */
  const sums = new Map<string, number>();
  const server: Server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (chunk: string) => {
      body += chunk;
    });
    req.on('end', () => {
      const message = JSON.parse(body);
      if (req.url === '/v1/traces') {
        for (const { resource, scopeSpans } of message.resourceSpans ?? []) {
          const service = attributesOf(resource?.attributes)['service.name'];
          for (const scope of scopeSpans ?? []) {
            for (const span of scope.spans ?? []) {
              spans.push({
                name: span.name,
                kind: span.kind,
                traceId: span.traceId,
                attributes: attributesOf(span.attributes),
                events: (span.events ?? []).map((e: { name: string }) => e.name),
                service,
              });
            }
          }
        }
      } else if (req.url === '/v1/metrics') {
        for (const { scopeMetrics } of message.resourceMetrics ?? []) {
          for (const scope of scopeMetrics ?? []) {
            for (const metric of scope.metrics ?? []) {
              for (const point of metric.sum?.dataPoints ?? []) {
                const key = `${metric.name} ${JSON.stringify(attributesOf(point.attributes))}`;
                sums.set(key, Number(point.asInt ?? point.asDouble));
              }
            }
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receivers.push(server);
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, spans, sums };
}

const receivers: Server[] = [];
afterEach(() => {
  for (const server of receivers.splice(0)) server.close();
});

describe('the gateway with OTEL_EXPORTER_OTLP_ENDPOINT', () => {
  it('exports a server span per request with its decision, the Redis calls beneath, and the decision counts', async () => {
    const receiver = await otlpReceiver();
    const gateway = await startGateway({
      REDIS_URL: inject('redisUrl'),
      SENTINEL_CONFIG: configFile('gateway.yaml', `prefix: ${uniquePrefix('gateway')}\n`),
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_METRIC_EXPORT_INTERVAL: '500',
      OTEL_BSP_SCHEDULE_DELAY: '50',
      OTEL_LOGS_EXPORTER: 'none',
    });
    const statuses = [];
    for (let i = 0; i < 11; i++) {
      statuses.push((await fetch(`${gateway.url}/hello`, { headers: FREE })).status);
    }
    expect(statuses).toEqual([...Array(10).fill(200), 429]);
    // SIGTERM flushes what the SDK still holds.
    gateway.child.kill('SIGTERM');
    expect(await gateway.exited).toBe(0);

    const requests = receiver.spans.filter(
      (span) => span.kind === 2 && span.attributes['sentinel.result'] !== undefined,
    );
    expect(requests.map((span) => span.attributes['sentinel.result'])).toEqual([
      ...Array(10).fill('allowed'),
      'limited',
    ]);
    expect(requests[0]).toMatchObject({
      service: 'sentinel-gateway',
      events: expect.arrayContaining(['sentinel.decision']),
      attributes: { 'sentinel.tier': 'FREE', 'http.response.status_code': 200 },
    });
    const traces = new Set(requests.map((span) => span.traceId));
    const redisCalls = receiver.spans.filter(
      (span) => span.kind === 3 && span.attributes['db.system.name'] === 'redis',
    );
    expect(redisCalls.filter((span) => traces.has(span.traceId)).length).toBeGreaterThanOrEqual(11);
    const decisions = (result: string) =>
      [...receiver.sums]
        .filter(
          ([key]) =>
            key.startsWith('sentinel.decisions ') && key.includes(`"sentinel.result":"${result}"`),
        )
        .reduce((sum, [, value]) => sum + value, 0);
    expect([decisions('allowed'), decisions('limited')]).toEqual([10, 1]);
    // The raw API key is in no span and no metric.
    expect(JSON.stringify([receiver.spans, [...receiver.sums]])).not.toContain('demo-free-key');
  });
});
