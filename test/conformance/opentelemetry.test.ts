// `openTelemetry` through every adapter: the decisions an SDK counts, bans included, and the
// server span of each request, as an HTTP instrumentation makes it, carrying its decision.
import type { Server } from 'node:http';
import { context, SpanKind, trace } from '@opentelemetry/api';
import { afterEach, expect, it } from 'vitest';
import { clientOf } from '../adapters/requests.ts';
import {
  decisionCount,
  type MetricsSdk,
  metricsSdk,
  type TracingSdk,
  tracingSdk,
} from '../harness/opentelemetry.ts';
import { conformance, useStore } from './adapters.ts';

const sdks: Array<MetricsSdk | TracingSdk> = [];
afterEach(async () => {
  await Promise.all(sdks.splice(0).map((sdk) => sdk.shutdown()));
});

/**
 * Runs every request of `server` inside a server span of its own, ended when its response
 * closes: what an HTTP instrumentation does, so that the limiter finds the span active.
 */
function traceEveryRequest(server: Server, tracing: TracingSdk): void {
  const tracer = tracing.tracerProvider.getTracer('http');
  const listeners = server.listeners('request') as Array<(...args: unknown[]) => void>;
  server.removeAllListeners('request');
  server.on('request', (req, res) => {
    const span = tracer.startSpan(`GET ${req.url}`, { kind: SpanKind.SERVER });
    res.on('close', () => span.end());
    context.with(trace.setSpan(context.active(), span), () => {
      for (const listener of listeners) listener.call(server, req, res);
    });
  });
}

conformance((driver, storeName) => {
  it('counts allowed, limited and banned requests, and adds each decision to its server span', async () => {
    const metrics = metricsSdk();
    const tracing = tracingSdk();
    sdks.push(metrics, tracing);
    const { options } = useStore(storeName);
    const built = await driver.build({
      options: {
        ...options,
        name: 'api',
        limit: 2,
        window: '1h',
        ban: 1,
        identify: () => ({ key: 'mallory' }),
        openTelemetry: {
          meterProvider: metrics.meterProvider,
          tracerProvider: tracing.tracerProvider,
        },
      },
    });
    traceEveryRequest(built.server, tracing);
    const app = clientOf(built);
    try {
      const statuses = [];
      for (let i = 0; i < 5; i++) statuses.push((await app.get('/')).status);
      expect(statuses).toEqual([200, 200, 429, 403, 403]);
    } finally {
      await built.close();
    }
    const read = await metrics.read();
    const count = (result: string) =>
      decisionCount(read, result, {
        'sentinel.policy': 'api',
        'sentinel.algorithm': 'token-bucket',
      });
    // Every refusal is the policy's; two of them the ban turned into 403s.
    expect([count('allowed'), count('limited'), count('banned')]).toEqual([2, 3, 2]);
    const servers = tracing
      .spans()
      .filter((span) => span.kind === SpanKind.SERVER)
      .sort((a, b) => a.startTime[0] - b.startTime[0] || a.startTime[1] - b.startTime[1]);
    expect(servers.map((span) => span.attributes['sentinel.result'])).toEqual([
      'allowed',
      'allowed',
      'limited',
      'limited',
      'limited',
    ]);
    expect(servers.map((span) => span.attributes['sentinel.remaining'])).toEqual([1, 0, 0, 0, 0]);
    // On Redis, each decision's script call is a client span in the request's trace.
    const clients = tracing.spans().filter((span) => span.kind === SpanKind.CLIENT);
    if (storeName === 'redis') {
      const traces = new Set(servers.map((span) => span.spanContext().traceId));
      expect(clients.length).toBeGreaterThanOrEqual(5);
      for (const span of clients) {
        expect(span.attributes['db.system.name']).toBe('redis');
        expect(traces.has(span.spanContext().traceId)).toBe(true);
      }
    } else {
      expect(clients).toEqual([]);
    }
  });
});
