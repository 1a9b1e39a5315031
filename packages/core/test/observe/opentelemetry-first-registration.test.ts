// `openTelemetry` in an app that has registered nothing with @opentelemetry/api yet, alone in its
// file so that no other suite has registered anything first: the limiter skips the API then, and
// must reach the first SDK the app registers all the same.
import { metrics, trace } from '@opentelemetry/api';
import { expect, it } from 'vitest';
import { decisionCount, metricsSdk, tracingSdk } from '../../../../test/harness/opentelemetry.ts';
import { owned } from '../../../../test/harness/own-redis.ts';
import { createLimiter, MemoryStore } from '../../src/index.ts';

/** Where @opentelemetry/api 1.x keeps what an app registers. */
const REGISTRY = Symbol.for('opentelemetry.js.api.1');
const tier = { tier: 'FREE' };

it('reaches the first SDK an app ever registers, from a limiter deciding since before it', async () => {
  expect(REGISTRY in globalThis).toBe(false);
  const limiter = owned(
    createLimiter({
      store: new MemoryStore(),
      tiers: { FREE: { name: 'free', limit: 3, window: '1m' } },
      openTelemetry: true,
    }),
  );
  expect((await limiter.consume('alice', tier)).allowed).toBe(true);
  expect(REGISTRY in globalThis).toBe(false);
  const sdk = metricsSdk();
  metrics.setGlobalMeterProvider(sdk.meterProvider);
  // Registers the context manager, as an SDK's start does.
  const tracing = tracingSdk();
  trace.setGlobalTracerProvider(tracing.tracerProvider);
  await tracing.inSpan('request', () => limiter.consume('alice', tier));
  await limiter.consume('alice', tier);
  await limiter.consume('alice', tier);
  const read = await sdk.read();
  const count = (result: string) =>
    decisionCount(read, result, {
      'sentinel.policy': 'free',
      'sentinel.tier': 'FREE',
      'sentinel.algorithm': 'token-bucket',
    });
  // The decision before the SDK was recorded nowhere; every one after it, and in its span.
  expect([count('allowed'), count('limited')]).toEqual([2, 1]);
  const request = tracing.spans().find((span) => span.name === 'request');
  expect(request?.attributes['sentinel.result']).toBe('allowed');
  expect(request?.events.map((event) => event.name)).toEqual(['sentinel.decision']);
  await Promise.all([sdk.shutdown(), tracing.shutdown()]);
});
