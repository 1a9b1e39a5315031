// What `openTelemetry` costs: decisions per second from one process on Redis, 256 in flight, with
// it off and on. On with @opentelemetry/api and no SDK, against off, and against a second limiter
// with it off for the noise; and on with an SDK exporting to memory, each decision inside a request
// span of the app's, against the same spans with it off; and, for the bound, the app making by
// hand the SDK calls the option makes per decision. The contenders take turns in short stretches,
// since a goal of 2% is finer than what rounds of seconds can tell apart on this host.
import { context, metrics, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  InMemorySpanExporter,
} from '@opentelemetry/sdk-trace-base';
import { createLimiter, type Limiter } from '@sentinel/core';
import {
  type BenchConfig,
  inStretches,
  rate,
  type SuiteReport,
  saturate,
  times,
} from '../lib/measure.ts';
import { startRedis } from '../lib/redis-server.ts';

const IN_FLIGHT = 256;
/** Each turn of a contender. */
const STRETCH_MS = 200;
const KEYS = 10_000;
const LIMIT = 1_000_000_000;
/** With the API and no SDK, at least this share of the same build's rate with it off. */
const NO_SDK_GOAL = 0.98;
/** With an SDK, at least this share of the same app's rate with the option off. */
const SDK_GOAL = 0.9;

const keys = Array.from({ length: KEYS }, (_, i) => `tenant-${i}`);

/** Decisions per second of `limiter`, each call made through `wrap`. */
async function decisionsPerSecond(
  limiter: Limiter,
  ms: number,
  wrap: (decide: () => Promise<unknown>) => Promise<unknown>,
): Promise<number> {
  return saturate(IN_FLIGHT, ms, (i) => wrap(() => limiter.consume(keys[i % KEYS] as string)));
}

const direct = (decide: () => Promise<unknown>) => decide();

export async function telemetry(config: BenchConfig): Promise<SuiteReport> {
  const redis = await startRedis();
  const seconds = config.smoke ? 0.3 : config.seconds;
  // Each contender's time in all, as rounds of `seconds` would give it.
  const totalMs = (config.smoke ? 1 : config.rounds) * seconds * 1000;
  const policy = { limit: LIMIT, window: '1h', redisUrl: redis.url } as const;
  const off = createLimiter(policy);
  const offAgain = createLimiter(policy);
  const noSdk = createLimiter({ ...policy, openTelemetry: true });
  // The SDK an app registers: a context manager, metrics read every second, spans batched.
  const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({
    exporter: metricExporter,
    exportIntervalMillis: 1_000,
  });
  const meterProvider = new MeterProvider({ readers: [reader] });
  const spanExporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({
    spanProcessors: [new BatchSpanProcessor(spanExporter)],
  });
  const withSdk = createLimiter({
    ...policy,
    openTelemetry: { meterProvider, tracerProvider },
  });
  const tracer = tracerProvider.getTracer('app');
  const handDuration = meterProvider
    .getMeter('app')
    .createHistogram('app.decision.duration', { unit: 's' });
  /**
   * What `openTelemetry` asks of the SDK per decision, made by the app around a limiter with it
   * off: a duration record by result, and the decision as span attributes and one event.
   */
  const byHand = async (key: string) => {
    const started = performance.now();
    const decision = await off.consume(key);
    handDuration.record((performance.now() - started) / 1000, { 'sentinel.result': 'allowed' });
    const event = {
      'sentinel.result': 'allowed',
      'sentinel.policy': decision.policy,
      'sentinel.algorithm': 'token-bucket',
      'sentinel.limit': decision.limit,
      'sentinel.remaining': decision.remaining,
      'sentinel.reset': decision.resetMs / 1000,
    };
    const span = trace.getActiveSpan();
    span?.setAttributes(event);
    span?.addEvent('sentinel.decision', event);
    return decision;
  };
  /** Each decision in a request span, as an HTTP instrumentation makes one per request. */
  const inRequestSpan = (decide: () => Promise<unknown>) =>
    tracer.startActiveSpan('GET /', (span) => decide().finally(() => span.end()));
  /** Drops what the exporters kept, so memory does not grow round after round. */
  const emptied = async (rps: number) => {
    spanExporter.reset();
    metricExporter.reset();
    return rps;
  };
  try {
    for (const limiter of [off, offAgain, noSdk, withSdk]) await limiter.consume('warm-up');
    // No SDK: no context manager either, as an app without one has none.
    const bare = await inStretches(totalMs, STRETCH_MS, [
      { name: 'off', run: (ms) => decisionsPerSecond(off, ms, direct) },
      { name: 'no SDK', run: (ms) => decisionsPerSecond(noSdk, ms, direct) },
      { name: 'off, again', run: (ms) => decisionsPerSecond(offAgain, ms, direct) },
    ]);
    const contextManager = new AsyncLocalStorageContextManager().enable();
    context.setGlobalContextManager(contextManager);
    const sdk = await inStretches(totalMs, STRETCH_MS, [
      {
        name: 'SDK, off',
        run: (ms) => decisionsPerSecond(off, ms, inRequestSpan).then(emptied),
      },
      {
        name: 'SDK, on',
        run: (ms) => decisionsPerSecond(withSdk, ms, inRequestSpan).then(emptied),
      },
      {
        name: 'SDK, by hand',
        run: (ms) =>
          saturate(IN_FLIGHT, ms, (i) =>
            inRequestSpan(() => byHand(keys[i % KEYS] as string)),
          ).then(emptied),
      },
    ]);
    context.disable();
    const figure = (runs: Map<string, number>, name: string) => runs.get(name) ?? Number.NaN;
    const offRate = figure(bare, 'off');
    const noSdkRate = figure(bare, 'no SDK');
    const againShare = figure(bare, 'off, again') / offRate;
    const sdkOffRate = figure(sdk, 'SDK, off');
    const sdkOnRate = figure(sdk, 'SDK, on');
    const byHandRate = figure(sdk, 'SDK, by hand');
    const noSdkShare = noSdkRate / offRate;
    const sdkShare = sdkOnRate / sdkOffRate;
    const boundShare = byHandRate / sdkOffRate;
    return {
      title: 'OpenTelemetry',
      method: `Decisions per second from one Node process on the bench's Redis, ${IN_FLIGHT} in flight over ${KEYS / 1000}k keys, a token bucket of ${LIMIT} an hour (every call admitted), \`createLimiter\` with \`redisUrl\`. First \`openTelemetry\` off against \`openTelemetry: true\` with @opentelemetry/api installed and no SDK registered (no context manager either), and against a second limiter with it off, whose share is the noise of the measure. Then, with an SDK as an app registers it (an AsyncLocalStorage context manager, a MeterProvider read every second into an in-memory exporter, a tracer provider batching spans into an in-memory exporter), each decision inside a request span of the app's, as an HTTP instrumentation makes one: \`openTelemetry\` off against on, which adds the decision to that span, records the metrics and makes a client span per script call; and, for the bound, the option off with the app making by hand the SDK calls it makes per decision (a duration record by result, six span attributes and an event with them). Each limiter has its own connection. The contenders of each set take turns in stretches of ${STRETCH_MS} ms, in reverse order every other turn, until each has run ${totalMs / 1000} s (the exporters emptied after each); the mean rate over its stretches. Rounds of seconds could not measure this: the host's speed moves between two states about 2× apart for seconds at a time.`,
      columns: ['contender', 'decisions/s', 'share of the same without telemetry'],
      rows: [
        ['`openTelemetry` off', rate(offRate), '1.00'],
        ['on, @opentelemetry/api, no SDK', rate(noSdkRate), noSdkShare.toFixed(3)],
        [
          'off, a second limiter (the noise)',
          rate(figure(bare, 'off, again')),
          againShare.toFixed(3),
        ],
        ['in request spans, `openTelemetry` off', rate(sdkOffRate), '1.00'],
        ['in request spans, on, SDK to memory', rate(sdkOnRate), sdkShare.toFixed(3)],
        ['in request spans, off, its SDK calls by hand', rate(byHandRate), boundShare.toFixed(3)],
      ],
      ratios: [
        { label: 'OpenTelemetry on, no SDK / off', value: noSdkShare, goal: NO_SDK_GOAL },
        { label: 'a second limiter, off / off (the noise)', value: againShare },
        { label: 'OpenTelemetry on, SDK / off, in request spans', value: sdkShare, goal: SDK_GOAL },
        { label: 'its SDK calls by hand / off, in request spans (the bound)', value: boundShare },
      ],
      targets: [
        {
          goal: `OpenTelemetry: with the API installed and no SDK, decisions per second within ${Math.round((1 - NO_SDK_GOAL) * 100)}% of the same build with it off`,
          figure: `${rate(noSdkRate)}/s against ${rate(offRate)}/s: ${noSdkShare.toFixed(3)}×; a second limiter with it off: ${againShare.toFixed(3)}×`,
          met: noSdkShare >= NO_SDK_GOAL,
        },
        {
          goal: `OpenTelemetry: with an SDK exporting to memory, at most ${Math.round((1 - SDK_GOAL) * 100)}% fewer decisions per second at ${IN_FLIGHT} in flight`,
          figure: `${rate(sdkOnRate)}/s against ${rate(sdkOffRate)}/s: ${times(sdkShare)}; the same SDK calls by hand: ${times(boundShare)}`,
          met: sdkShare >= SDK_GOAL,
        },
      ],
      gates: [
        { label: 'OpenTelemetry, no SDK / off', value: noSdkShare, collapse: 0.5 },
        { label: 'OpenTelemetry, SDK / off', value: sdkShare, collapse: 0.2 },
      ],
    };
  } finally {
    metrics.disable();
    trace.disable();
    await Promise.all([off.close(), offAgain.close(), noSdk.close(), withSdk.close()]);
    await Promise.all([meterProvider.shutdown(), tracerProvider.shutdown()]);
    await redis.stop();
  }
}
