// `openTelemetry`: the metrics and spans a real OpenTelemetry SDK receives from real decisions,
// on the memory store and on a real Redis, with the SDK given, registered late, or absent.
import { metrics, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { connect, uniquePrefix } from '../../../../test/harness/clients.ts';
import {
  decisionCount,
  type ExportedMetric,
  metricsSdk,
  pointsOf,
  pointValue,
  type TracingSdk,
  tracingSdk,
} from '../../../../test/harness/opentelemetry.ts';
import { owned, ownServer } from '../../../../test/harness/own-redis.ts';
import {
  createHttpLimiter,
  createLimiter,
  fingerprint,
  type LimiterOptions,
  MemoryStore,
  storageIdentity,
} from '../../src/index.ts';
import { prometheusMetrics } from '../../src/observe/prometheus.ts';

const FREE = { FREE: { name: 'free', limit: 3, window: '1m' } } as const;
const tier = { tier: 'FREE' };

afterEach(() => {
  // Registered globally by a test: the next starts without an SDK.
  metrics.disable();
  trace.disable();
});

/** The attributes of policy `free`'s decisions, tier FREE. */
const FREE_DECISIONS = {
  'sentinel.policy': 'free',
  'sentinel.tier': 'FREE',
  'sentinel.algorithm': 'token-bucket',
};

/** The decision count by result, of policy `free`, tier FREE, token bucket. */
function decisions(read: Map<string, ExportedMetric>, result: string): number {
  return decisionCount(read, result, FREE_DECISIONS);
}

describe('openTelemetry metrics', () => {
  it('counts decisions by result, policy, tier and algorithm, and times them, in seconds', async () => {
    const sdk = metricsSdk();
    const limiter = owned(
      createLimiter({
        store: new MemoryStore(),
        tiers: FREE,
        openTelemetry: { meterProvider: sdk.meterProvider },
      }),
    );
    for (let i = 0; i < 5; i++) await limiter.consume('alice', tier);
    await limiter.peek('alice', tier);
    const read = await sdk.read();
    expect(decisions(read, 'allowed')).toBe(3);
    expect(decisions(read, 'limited')).toBe(3);
    const counter = read.get('sentinel.decisions');
    expect(counter?.unit).toBe('{decision}');
    const duration = read.get('sentinel.decision.duration');
    expect(duration?.unit).toBe('s');
    expect(duration?.points.reduce((sum, p) => sum + p.value, 0)).toBe(6);
    await sdk.shutdown();
  });

  it('adds up the decisions of limiters that share a meter provider and their attributes', async () => {
    const sdk = metricsSdk();
    const options = { tiers: FREE, openTelemetry: { meterProvider: sdk.meterProvider } };
    const a = owned(createLimiter({ store: new MemoryStore(), ...options }));
    const b = owned(createLimiter({ store: new MemoryStore(), ...options }));
    for (let i = 0; i < 2; i++) await a.consume('alice', tier);
    for (let i = 0; i < 4; i++) await b.consume('bob', tier);
    const read = await sdk.read();
    expect([decisions(read, 'allowed'), decisions(read, 'limited')]).toEqual([5, 1]);
    await sdk.shutdown();
  });

  it('holds the instruments of an SDK registered after the limiter was built', async () => {
    const limiter = owned(
      createLimiter({ store: new MemoryStore(), tiers: FREE, openTelemetry: true }),
    );
    // No SDK yet: the API's no-ops, and decisions as ever.
    expect((await limiter.consume('alice', tier)).allowed).toBe(true);
    const sdk = metricsSdk();
    metrics.setGlobalMeterProvider(sdk.meterProvider);
    await limiter.consume('alice', tier);
    await limiter.consume('alice', tier);
    await limiter.consume('alice', tier);
    const read = await sdk.read();
    // What came before the SDK was recorded nowhere; what came after, all of it.
    expect(decisions(read, 'allowed')).toBe(2);
    expect(decisions(read, 'limited')).toBe(1);
    await sdk.shutdown();
  });

  it('without an SDK, decides as it does with the option off, and records nothing anywhere', async () => {
    const on = owned(createLimiter({ store: new MemoryStore(), tiers: FREE, openTelemetry: true }));
    const off = owned(createLimiter({ store: new MemoryStore(), tiers: FREE }));
    const seen = [];
    for (let i = 0; i < 5; i++) {
      const [a, b] = await Promise.all([on.consume('k', tier), off.consume('k', tier)]);
      seen.push([a.allowed, b.allowed, a.remaining === b.remaining]);
    }
    expect(seen).toEqual([
      [true, true, true],
      [true, true, true],
      [true, true, true],
      [false, false, true],
      [false, false, true],
    ]);
  });

  it('counts the same decisions as the Prometheus helper, outcome by outcome', async () => {
    const sdk = metricsSdk();
    const registry = new Registry();
    const limiter = owned(
      createLimiter({
        store: new MemoryStore(),
        tiers: { ...FREE, PRO: [{ name: 'pro', limit: 5, window: '1m', algorithm: 'gcra' }] },
        observe: prometheusMetrics(registry),
        openTelemetry: { meterProvider: sdk.meterProvider },
        onError: () => {},
      }),
    );
    for (let i = 0; i < 7; i++) await limiter.consume(`user-${i % 2}`, tier);
    for (let i = 0; i < 9; i++) await limiter.consume('pro-user', { tier: 'PRO' });
    for (let i = 0; i < 2; i++) await limiter.peek('pro-user', { tier: 'PRO' });
    // An unknown tier is answered by the failure mode: degraded, in both.
    await limiter.consume('who', { tier: 'GOLD' });
    const read = await sdk.read();
    const prometheus = (await registry.getSingleMetric('sentinel_decisions_total')?.get())?.values;
    expect(prometheus?.length).toBeGreaterThan(3);
    for (const { labels, value } of prometheus ?? []) {
      const points = pointsOf(read, 'sentinel.decisions').filter(
        (p) =>
          p.attributes['sentinel.result'] === labels.outcome &&
          p.attributes['sentinel.policy'] === labels.policy &&
          (p.attributes['sentinel.tier'] ?? '') === labels.tier,
      );
      expect(
        points.reduce((sum, p) => sum + p.value, 0),
        JSON.stringify(labels),
      ).toBe(value);
    }
    const total = pointsOf(read, 'sentinel.decisions').reduce((sum, p) => sum + p.value, 0);
    expect(total).toBe(19);
    await sdk.shutdown();
  });

  it('never puts a key, an identity or its fingerprint in an attribute, whatever the key', async () => {
    const sdk = metricsSdk();
    const tracing = tracingSdk();
    const limiter = owned(
      createLimiter({
        store: new MemoryStore(),
        tiers: FREE,
        openTelemetry: { meterProvider: sdk.meterProvider },
        onError: () => {},
      }),
    );
    const hostile = [
      '203.0.113.7',
      'sk_live_0123456789abcdef',
      'free',
      'FREE',
      'allowed',
      `${'a'.repeat(5000)}`,
      'tenant\u0000FREE',
      '\u{1F600}\u202E',
      '{"sentinel.result":"allowed"}',
      ...Array.from({ length: 200 }, (_, i) => `client-${i}`),
    ];
    // Four each: three admitted, one refused.
    await tracing.inSpan('request', async () => {
      for (const key of hostile) for (let i = 0; i < 4; i++) await limiter.consume(key, tier);
    });
    const read = await sdk.read();
    const allowedKeys = new Set([
      'sentinel.result',
      'sentinel.policy',
      'sentinel.tier',
      'sentinel.algorithm',
    ]);
    const sets = pointsOf(read, 'sentinel.decisions').map((p) => p.attributes);
    // Two results for one policy of one tier: two attribute sets, however many keys.
    expect(sets).toHaveLength(2);
    const values = new Set<string>();
    for (const metric of read.values()) {
      for (const point of metric.points) {
        for (const [name, value] of Object.entries(point.attributes)) {
          expect(allowedKeys.has(name), name).toBe(true);
          values.add(String(value));
        }
      }
    }
    expect([...values].sort()).toEqual(['FREE', 'allowed', 'free', 'limited', 'token-bucket']);
    // Nor in the span, in any form: raw, as stored, or fingerprinted.
    const spanText = JSON.stringify(
      tracing.spans().map((s) => [s.attributes, s.events.map((e) => e.attributes)]),
    );
    for (const key of hostile.filter((k) => !/^(free|FREE|allowed)$/.test(k))) {
      expect(spanText.includes(key)).toBe(false);
      expect(spanText.includes(storageIdentity(key))).toBe(false);
      expect(spanText.includes(fingerprint(key))).toBe(false);
    }
    await sdk.shutdown();
  });

  it('counts concurrency slots in flight, and those that lapsed, by tier and policy', async () => {
    const sdk = metricsSdk();
    let now = Date.UTC(2026, 0, 1);
    const limiter = owned(
      createLimiter({
        store: new MemoryStore({ clock: () => now }),
        tiers: {
          PRO: [
            { name: 'rate', limit: 100, window: '1m' },
            { name: 'slots', concurrency: 3, lease: '10s' },
          ],
        },
        openTelemetry: { meterProvider: sdk.meterProvider },
      }),
    );
    const a = await limiter.consume('t', { tier: 'PRO' });
    const b = await limiter.consume('t', { tier: 'PRO', cost: 2 });
    const slots = { 'sentinel.tier': 'PRO', 'sentinel.policy': 'slots' };
    expect(pointValue(await sdk.read(), 'sentinel.concurrency.in_flight', slots)).toBe(3);
    await limiter.release(a);
    now += 11_000;
    await limiter.release(b);
    const read = await sdk.read();
    expect(pointValue(read, 'sentinel.concurrency.in_flight', slots)).toBe(0);
    expect(pointValue(read, 'sentinel.concurrency.lapsed', slots)).toBe(2);
    await sdk.shutdown();
  });

  it('counts store errors by code, and shows the breaker open', async () => {
    const sdk = metricsSdk();
    const server = await ownServer();
    const client = connect('ioredis 6', server.url, { enableOfflineQueue: false });
    const limiter = owned(
      createLimiter({
        redis: client,
        prefix: uniquePrefix('otel'),
        tiers: FREE,
        breaker: { failures: 2, cooldownMs: 60_000 },
        openTelemetry: { meterProvider: sdk.meterProvider },
        onError: () => {},
      }),
    );
    expect((await limiter.consume('alice', tier)).degraded).toBeUndefined();
    await server.stop();
    const after = [];
    for (let i = 0; i < 4; i++) after.push((await limiter.consume('alice', tier)).degraded);
    expect(after).toEqual(['allow', 'allow', 'allow', 'allow']);
    const read = await sdk.read();
    const errors = pointsOf(read, 'sentinel.store.errors');
    // Two failures opened the breaker; the calls after it never reached the store.
    expect(errors.reduce((sum, p) => sum + p.value, 0)).toBe(2);
    expect(errors.every((p) => typeof p.attributes['error.type'] === 'string')).toBe(true);
    expect(pointsOf(read, 'sentinel.breaker.open').map((p) => p.value)).toEqual([1]);
    expect(decisions(read, 'degraded')).toBe(4);
    await sdk.shutdown();
  });
});

describe('openTelemetry through the HTTP layer', () => {
  it("counts a request `shed` refused as shed, under the fleet's tier and policy", async () => {
    const sdk = metricsSdk();
    const limiter = createHttpLimiter({
      store: new MemoryStore(),
      prefix: uniquePrefix('otel-shed'),
      limit: 100,
      window: '1m',
      shed: { concurrency: 2, reserve: 0 },
      openTelemetry: { meterProvider: sdk.meterProvider },
    });
    const client = { headers: {}, ip: '203.0.113.9' };
    const verdicts = [];
    for (let i = 0; i < 3; i++) verdicts.push(await limiter.check(client));
    expect(verdicts.map((v) => v.action)).toEqual(['next', 'next', 'respond']);
    const read = await sdk.read();
    const fleet = (result: string) =>
      decisionCount(read, result, {
        'sentinel.policy': 'fleet',
        'sentinel.tier': 'shed',
        'sentinel.algorithm': 'concurrency',
      });
    expect([fleet('allowed'), fleet('shed'), fleet('limited')]).toEqual([2, 1, 0]);
    // The identity's own policy decided only the two let in.
    const own = pointsOf(read, 'sentinel.decisions').filter(
      (p) => p.attributes['sentinel.policy'] !== 'fleet',
    );
    expect(own.map((p) => [p.attributes['sentinel.result'], p.value])).toEqual([['allowed', 2]]);
    const slots = { 'sentinel.tier': 'shed', 'sentinel.policy': 'fleet' };
    expect(pointValue(read, 'sentinel.concurrency.in_flight', slots)).toBe(2);
    await limiter.close();
    await sdk.shutdown();
  });
});

/** A limiter on the run's Redis whose store calls go to `tracing`'s provider. */
function tracedLimiter(tracing: TracingSdk, options: Partial<LimiterOptions> = {}) {
  return owned(
    createLimiter({
      redis: connect(),
      prefix: uniquePrefix('otel'),
      tiers: FREE,
      openTelemetry: { tracerProvider: tracing.tracerProvider },
      ...options,
    }),
  );
}

describe('openTelemetry traces', () => {
  it("adds the decision to the caller's span, with one event, and gives the store call a client span beneath it", async () => {
    const tracing = tracingSdk();
    const limiter = tracedLimiter(tracing);
    await tracing.inSpan('GET /search', () => limiter.consume('alice', tier));
    const spans = tracing.spans();
    const request = spans.find((s) => s.name === 'GET /search');
    expect(request?.attributes).toMatchObject({
      'sentinel.result': 'allowed',
      'sentinel.policy': 'free',
      'sentinel.tier': 'FREE',
      'sentinel.algorithm': 'token-bucket',
      'sentinel.limit': 3,
      'sentinel.remaining': 2,
    });
    expect(request?.events.map((e) => e.name)).toEqual(['sentinel.decision']);
    const store = spans.find((s) => s.kind === SpanKind.CLIENT);
    expect(store?.name).toMatch(/^(FCALL|EVALSHA) sentinel_/);
    expect(store?.attributes).toMatchObject({
      'db.system.name': 'redis',
      'db.operation.name': expect.stringMatching(/^(FCALL|EVALSHA)$/),
    });
    expect(store?.parentSpanContext?.spanId).toBe(request?.spanContext().spanId);
    expect(store?.spanContext().traceId).toBe(request?.spanContext().traceId);
  });

  it('gives a batch one client span, linked to every request it served', async () => {
    const tracing = tracingSdk();
    const limiter = tracedLimiter(tracing);
    await limiter.consume('warm', tier);
    // Three requests in one turn of the event loop: one script call.
    await Promise.all(
      ['a', 'b', 'c'].map((key) => tracing.inSpan(`GET /${key}`, () => limiter.consume(key, tier))),
    );
    const spans = tracing.spans();
    const requests = spans.filter((s) => s.name.startsWith('GET /'));
    const batches = spans.filter((s) => s.kind === SpanKind.CLIENT);
    expect(batches).toHaveLength(1);
    const batch = batches[0];
    expect(batch?.attributes['db.operation.batch.size']).toBe(3);
    expect(batch?.parentSpanContext).toBeUndefined();
    expect(batch?.links.map((l) => l.context.spanId).sort()).toEqual(
      requests.map((r) => r.spanContext().spanId).sort(),
    );
  });

  it('marks the span of a degraded decision with the error and the failure mode', async () => {
    const tracing = tracingSdk();
    const server = await ownServer();
    const client = connect('ioredis 6', server.url, { enableOfflineQueue: false });
    const limiter = tracedLimiter(tracing, {
      redis: client,
      onStoreError: 'deny',
      onError: () => {},
    });
    await limiter.consume('warm', tier);
    await server.stop();
    const decision = await tracing.inSpan('GET /', () => limiter.consume('alice', tier));
    expect(decision.degraded).toBe('deny');
    const request = tracing.spans().find((s) => s.name === 'GET /');
    expect(request?.status.code).toBe(SpanStatusCode.ERROR);
    expect(request?.status.message).toContain("'deny'");
    expect(request?.attributes).toMatchObject({
      'sentinel.result': 'degraded',
      'sentinel.failure_mode': 'deny',
      'error.type': decision.error?.code,
    });
    expect(request?.events.map((e) => e.name)).toContain('exception');
  });

  it('makes no client span for a call outside any trace', async () => {
    const tracing = tracingSdk();
    const limiter = tracedLimiter(tracing);
    await limiter.consume('alice', tier);
    expect(tracing.spans()).toEqual([]);
  });
});

describe('openTelemetry option', () => {
  it('throws a TypeError naming the option for a provider that is not one', () => {
    expect(() =>
      createLimiter({ limit: 1, window: '1m', openTelemetry: { meterProvider: {} as never } }),
    ).toThrow(/openTelemetry\.meterProvider.*getMeter/);
    expect(() =>
      createLimiter({ limit: 1, window: '1m', openTelemetry: { tracer: 1 } as never }),
    ).toThrow(TypeError);
    expect(() => createLimiter({ limit: 1, window: '1m', openTelemetry: 'yes' as never })).toThrow(
      /openTelemetry/,
    );
  });
});
