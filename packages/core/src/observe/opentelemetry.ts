// OpenTelemetry through @opentelemetry/api alone, an optional peer loaded only when the option
// asks for it: decisions as metrics, and as attributes and an event on the caller's span; each
// store call as a client span. With no SDK registered, every call here reaches a no-op.
import { createRequire } from 'node:module';
import type * as Api from '@opentelemetry/api';
import type { Decision, StoreCallInfo, StoreTrace, StoreTracer } from '../shared/types.ts';
import { checkObject, describe, fail, rejectUnknownFields } from '../shared/validation.ts';
import type { Observer } from './observer.ts';

/** A MeterProvider, as `@opentelemetry/api` declares one. */
export interface MeterProviderLike {
  getMeter(name: string, version?: string, options?: object): unknown;
}

/** A TracerProvider, as `@opentelemetry/api` declares one. */
export interface TracerProviderLike {
  getTracer(name: string, version?: string, options?: object): unknown;
}

export interface OpenTelemetryOptions {
  /** Where the instruments come from. @default the global MeterProvider, as it is at each use */
  meterProvider?: MeterProviderLike;
  /** Where the store's client spans come from. @default the global TracerProvider */
  tracerProvider?: TracerProviderLike;
}

const OPTION_NAMES = [
  'meterProvider',
  'tracerProvider',
] as const satisfies readonly (keyof OpenTelemetryOptions)[];

/** The meter's and the tracer's name. */
export const INSTRUMENTATION_NAME = '@sentinel/core';

/** What `sentinel.result` says of a decision. */
export type DecisionResult = 'allowed' | 'limited' | 'degraded' | 'shed' | 'banned';

/** The attribute set of each result alone. */
const RESULTS: Record<DecisionResult, Api.Attributes> = Object.freeze({
  allowed: Object.freeze({ 'sentinel.result': 'allowed' }),
  limited: Object.freeze({ 'sentinel.result': 'limited' }),
  degraded: Object.freeze({ 'sentinel.result': 'degraded' }),
  shed: Object.freeze({ 'sentinel.result': 'shed' }),
  banned: Object.freeze({ 'sentinel.result': 'banned' }),
});

/** Bounds of the decision duration histogram, in seconds: a decision takes 1 µs to 50 ms. */
const DURATION_BOUNDS = [
  0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
  0.25,
];

/**
 * Where @opentelemetry/api 1.x keeps what an app registers (providers, the context manager):
 * absent until the first registration, so its absence means every call would reach a no-op.
 */
const API_GLOBAL = Symbol.for('opentelemetry.js.api.1');

/** Attribute sets kept for reuse at most: they are bounded by the configuration anyway. */
const MAX_ATTRIBUTE_SETS = 1000;

interface Instruments {
  /** false for a no-op meter: no SDK yet, so there is nothing to record. */
  readonly live: boolean;
  readonly duration: Api.Histogram;
  readonly inFlight: Api.UpDownCounter;
  readonly storeErrors: Api.Counter;
  readonly lateRefunds: Api.Counter;
  readonly lapsed: Api.Counter;
}

let loaded: { api: typeof Api; version: string } | undefined;

/** @opentelemetry/api, and this package's version, loaded once; a TypeError without the API. */
function load(): { api: typeof Api; version: string } {
  if (loaded) return loaded;
  const requireHere = createRequire(import.meta.url);
  let api: typeof Api;
  try {
    api = requireHere('@opentelemetry/api');
  } catch {
    fail('openTelemetry', 'needs the @opentelemetry/api package: npm install @opentelemetry/api');
  }
  let version = '';
  try {
    version = (requireHere('@sentinel/core/package.json') as { version: string }).version;
  } catch {
    // A bundle that dropped the manifest: the meter goes unversioned.
  }
  loaded = { api, version };
  return loaded;
}

/** Checks the option once; undefined when it is off. */
export function resolveOpenTelemetry(
  option: boolean | OpenTelemetryOptions | undefined,
): Telemetry | undefined {
  if (option === undefined || option === false) return undefined;
  if (option !== true) {
    checkObject(option, 'openTelemetry', 'true, or { meterProvider?, tracerProvider? }');
    rejectUnknownFields(option, OPTION_NAMES, 'openTelemetry');
    for (const [name, method] of [
      ['meterProvider', 'getMeter'],
      ['tracerProvider', 'getTracer'],
    ] as const) {
      const provider = option[name] as unknown;
      if (provider === undefined) continue;
      if (typeof (provider as Record<string, unknown> | null)?.[method] !== 'function') {
        fail(`openTelemetry.${name}`, `must have ${method}(), got ${describe(provider)}`);
      }
    }
  }
  const { api, version } = load();
  const given = option === true ? {} : option;
  return new Telemetry(api, version, given);
}

/**
 * One limiter's telemetry. Instruments are made from the meter provider in use at each record,
 * and made again when it changes: in JavaScript the metrics API has no proxy, so instruments
 * made before the app registers its SDK would stay no-ops for good.
 */
export class Telemetry {
  readonly #api: typeof Api;
  readonly #version: string;
  readonly #meterProvider: Api.MeterProvider | undefined;
  readonly #tracerProvider: Api.TracerProvider | undefined;
  #provider: Api.MeterProvider | undefined;
  #instruments: Instruments | undefined;
  #tracerOf: Api.TracerProvider | undefined;
  #tracer: Api.Tracer | undefined;
  /** Attribute sets by tier, then policy and algorithm, then result: made once and reused. */
  readonly #attributes: Nested<Nested<Nested<Map<DecisionResult, Api.Attributes>>>> = new Map();
  #attributeSets = 0;
  /**
   * Decisions counted by attribute set, read by the counter's callback when the SDK collects:
   * the SDK hashes the attributes of every synchronous record, which cost a third of a decision.
   */
  readonly #counts = new Map<Api.Attributes, number>();
  /** Each server's breaker, 1 while open, for the observable gauge. */
  readonly #breakers = new Map<string, number>();
  /** What a refusal of this limiter's is: `shed` for the fleet's count. */
  readonly #refusal: DecisionResult;

  constructor(
    api: typeof Api,
    version: string,
    options: OpenTelemetryOptions,
    refusal: DecisionResult = 'limited',
  ) {
    this.#api = api;
    this.#version = version;
    this.#meterProvider = options.meterProvider as Api.MeterProvider | undefined;
    this.#tracerProvider = options.tracerProvider as Api.TracerProvider | undefined;
    this.#refusal = refusal;
  }

  /**
   * Nothing registered and no meter provider given: no SDK to record to and no context to trace
   * in. One property read, where asking the API costs three global lookups a decision.
   */
  #idle(): boolean {
    return this.#meterProvider === undefined && !(API_GLOBAL in globalThis);
  }

  /** The same telemetry, whose refusals are `shed`: for the fleet's count under `shed`. */
  forShedding(): Telemetry {
    return new Telemetry(
      this.#api,
      this.#version,
      { meterProvider: this.#meterProvider, tracerProvider: this.#tracerProvider },
      'shed',
    );
  }

  /** The instruments of the meter provider in use now. */
  #current(): Instruments {
    const provider = this.#meterProvider ?? this.#api.metrics.getMeterProvider();
    if (provider !== this.#provider || this.#instruments === undefined) {
      this.#provider = provider;
      this.#instruments = this.#make(provider);
    }
    return this.#instruments;
  }

  #make(provider: Api.MeterProvider): Instruments {
    const api = this.#api;
    const meter = provider.getMeter(INSTRUMENTATION_NAME, this.#version);
    const live = meter.constructor !== api.createNoopMeter().constructor;
    const breakers = this.#breakers;
    this.#counts.clear();
    if (live) countDecisions(api, meter, this.#counts);
    meter
      .createObservableGauge('sentinel.breaker.open', {
        description: 'Whether the circuit breaker skips a store server: 1 while open, else 0.',
        unit: '{breaker}',
        valueType: api.ValueType.INT,
      })
      .addCallback((result) => {
        for (const [server, open] of breakers) result.observe(open, serverAttributes(server));
      });
    return {
      live,
      duration: meter.createHistogram('sentinel.decision.duration', {
        description: 'Time from a call to consume or peek to its decision.',
        unit: 's',
        advice: { explicitBucketBoundaries: DURATION_BOUNDS },
      }),
      inFlight: meter.createUpDownCounter('sentinel.concurrency.in_flight', {
        description: "Concurrency slots this process's requests hold, by tier and policy.",
        unit: '{slot}',
        valueType: api.ValueType.INT,
      }),
      storeErrors: meter.createCounter('sentinel.store.errors', {
        description: 'Store failures, by error code and server.',
        unit: '{error}',
        valueType: api.ValueType.INT,
      }),
      lateRefunds: meter.createCounter('sentinel.store.late_refunds', {
        description:
          'Consumes answered by the failure mode that the store had admitted all the same: given back, or left taken.',
        unit: '{refund}',
        valueType: api.ValueType.INT,
      }),
      lapsed: meter.createCounter('sentinel.concurrency.lapsed', {
        description: 'Concurrency slots released after their lease had ended.',
        unit: '{slot}',
        valueType: api.ValueType.INT,
      }),
    };
  }

  /** The result of a decision of this limiter's. */
  resultOf(decision: Decision): DecisionResult {
    if (decision.degraded !== undefined) return 'degraded';
    return decision.allowed ? 'allowed' : this.#refusal;
  }

  /** The attributes of a decision: bounded, fixed by the configuration; never its key. */
  #attributesOf(decision: Decision, result: DecisionResult): Api.Attributes {
    const { policy, tier } = decision;
    const algorithm = algorithmOf(decision);
    // Looked up part by part: a string built per decision cost 5% of one with an SDK.
    const byResult = nested(nested(nested(this.#attributes, tier ?? ''), policy), algorithm);
    let attributes = byResult.get(result);
    if (attributes === undefined) {
      attributes = Object.freeze({
        'sentinel.result': result,
        'sentinel.policy': policy,
        ...(tier !== undefined && { 'sentinel.tier': tier }),
        'sentinel.algorithm': algorithm,
      });
      // Past the bound (policies named per call, say), made afresh each time instead of kept.
      if (this.#attributeSets < MAX_ATTRIBUTE_SETS) {
        byResult.set(result, attributes);
        this.#attributeSets++;
      }
    }
    return attributes;
  }

  #counted(attributes: Api.Attributes): void {
    this.#counts.set(attributes, (this.#counts.get(attributes) ?? 0) + 1);
  }

  /** Counts a request an HTTP layer refused by a ban, with the decision that led to it. */
  countBanned(decision: Decision): void {
    if (!this.#idle() && this.#current().live) {
      this.#counted(this.#attributesOf(decision, 'banned'));
    }
  }

  /**
   * Times a decision and adds it to the caller's active span; just the call when neither an
   * SDK's meter nor a recording span would see it.
   */
  decide<K, O>(
    call: (keys: K, options: O) => Promise<Decision>,
    keys: K,
    options: O,
  ): Promise<Decision> {
    if (this.#idle()) return call(keys, options);
    const instruments = this.#current();
    const span = this.#api.trace.getActiveSpan();
    const recording = span?.isRecording() === true;
    if (!instruments.live && !recording) return call(keys, options);
    const started = performance.now();
    return call(keys, options).then((decision) => {
      const result = this.resultOf(decision);
      if (instruments.live) {
        // By result alone: the SDK hashes a record's attributes, at a cost that grows with them.
        instruments.duration.record((performance.now() - started) / 1000, RESULTS[result]);
      }
      if (recording) this.#annotate(span as Api.Span, decision, result);
      return decision;
    });
  }

  #annotate(span: Api.Span, decision: Decision, result: DecisionResult): void {
    // Property by property: spreading the attribute set into a new object was 5% of a decision's
    // time with an SDK, more than the SDK's own work on the span.
    const event: Api.Attributes = {
      'sentinel.result': result,
      'sentinel.policy': decision.policy,
      'sentinel.algorithm': algorithmOf(decision),
      'sentinel.limit': decision.limit,
      'sentinel.remaining': decision.remaining,
      'sentinel.reset': decision.resetMs / 1000,
    };
    if (decision.tier !== undefined) event['sentinel.tier'] = decision.tier;
    if (decision.retryAfterMs > 0) event['sentinel.retry_after'] = decision.retryAfterMs / 1000;
    span.setAttributes(event);
    span.addEvent('sentinel.decision', event);
    if (decision.degraded === undefined) return;
    // The store failed, and the failure mode answered: the span says which, and why.
    const code = decision.error?.code ?? 'BREAKER_OPEN';
    span.setAttributes({ 'sentinel.failure_mode': decision.degraded, 'error.type': code });
    if (decision.error !== undefined) span.recordException(decision.error);
    span.setStatus({
      code: this.#api.SpanStatusCode.ERROR,
      message: `rate limit store failed (${code}): answered by onStoreError '${decision.degraded}'`,
    });
  }

  /**
   * Counts a decision, and the slots it holds. The instruments `decide` found for the call, or
   * for the last call: a decision sent beside another limiter's has no call of its own.
   */
  count(decision: Decision): void {
    if (this.#idle()) return;
    const instruments = this.#instruments ?? this.#current();
    if (!instruments.live) return;
    this.#counted(this.#attributesOf(decision, this.resultOf(decision)));
    const { lease } = decision;
    if (lease === undefined) return;
    for (const policy of lease.policies) {
      instruments.inFlight.add(lease.slots, slotAttributes(decision.tier, policy));
    }
  }

  /** The metrics a limiter's other events keep. */
  readonly observer: Observer = {
    storeError: ({ server, error }) => {
      const instruments = this.#current();
      if (!instruments.live) return;
      instruments.storeErrors.add(1, { 'error.type': error.code, ...serverAttributes(server) });
    },
    breaker: ({ server, state }) => {
      this.#breakers.set(server, state === 'open' ? 1 : 0);
    },
    lateRefund: ({ tier, error }) => {
      const instruments = this.#current();
      if (!instruments.live) return;
      instruments.lateRefunds.add(1, {
        ...(tier !== undefined && { 'sentinel.tier': tier }),
        'sentinel.refund.result': error === undefined ? 'refunded' : 'failed',
      });
    },
    release: ({ tier, policies, slots, lapsed }) => {
      const instruments = this.#current();
      if (!instruments.live) return;
      for (const policy of policies) {
        const attributes = slotAttributes(tier, policy);
        instruments.inFlight.add(-slots, attributes);
        if (lapsed) instruments.lapsed.add(slots, attributes);
      }
    },
  };

  /**
   * The caller's place in a trace, for the client span of the store call that serves it;
   * undefined outside any trace, as most calls are without an SDK.
   */
  traceHere(): StoreTrace | undefined {
    if (!(API_GLOBAL in globalThis)) return undefined;
    const api = this.#api;
    const context = api.context.active();
    // No context manager, or no span: the usual case without an SDK.
    if (context === api.ROOT_CONTEXT) return undefined;
    const parent = api.trace.getSpanContext(context);
    // The invalid context's ID, not isSpanContextValid's hex scan of both IDs per call: what
    // sits in a context came through the SDK or a propagator, which checked it.
    if (parent === undefined || parent.traceId === api.INVALID_TRACEID) return undefined;
    return { tracer: this.storeTracer, context };
  }

  /** Store calls in client spans, with the database attributes OpenTelemetry gives Redis. */
  readonly storeTracer: StoreTracer = {
    span: (call, contexts, send) => this.#storeSpan(call, contexts as Api.Context[], send),
  };

  #storeSpan<T>(call: StoreCallInfo, contexts: Api.Context[], send: () => Promise<T>): Promise<T> {
    const api = this.#api;
    // Every context holds a valid span: `traceHere` gave none outside a trace.
    const attributes: Api.Attributes = {
      'db.system.name': 'redis',
      'db.operation.name': call.operation,
      'db.stored_procedure.name': call.procedure,
      ...serverAttributes(call.server),
      ...(call.requests > 1 && { 'db.operation.batch.size': call.requests }),
    };
    const name = `${call.operation} ${call.procedure}`;
    const kind = api.SpanKind.CLIENT;
    // One caller: its child. A batch: a span of its own, linked to each request it served.
    const span =
      call.requests === 1
        ? this.#tracerNow().startSpan(name, { kind, attributes }, contexts[0])
        : this.#tracerNow().startSpan(name, {
            kind,
            attributes,
            links: contexts.map((context) => ({
              context: api.trace.getSpanContext(context) as Api.SpanContext,
            })),
            root: true,
          });
    return send().then(
      (value) => {
        span.end();
        return value;
      },
      (error: unknown) => {
        const failure = error instanceof Error ? error : new Error(String(error));
        span.recordException(failure);
        span.setAttribute('error.type', (failure as { code?: string }).code ?? failure.name);
        span.setStatus({ code: api.SpanStatusCode.ERROR, message: failure.message });
        span.end();
        throw error;
      },
    );
  }

  #tracerNow(): Api.Tracer {
    const provider = this.#tracerProvider ?? this.#api.trace.getTracerProvider();
    if (provider !== this.#tracerOf || this.#tracer === undefined) {
      this.#tracerOf = provider;
      this.#tracer = provider.getTracer(INSTRUMENTATION_NAME, this.#version);
    }
    return this.#tracer;
  }
}

/** Each meter's decision counter, observed from the counts of every limiter that records on it. */
const decisionCounters = new WeakMap<object, Set<Map<Api.Attributes, number>>>();

/**
 * Adds `counts` to the sources of `meter`'s `sentinel.decisions`, an asynchronous counter made
 * with the first: limiters with the same attributes, each with its own counts, add up.
 */
function countDecisions(
  api: typeof Api,
  meter: Api.Meter,
  counts: Map<Api.Attributes, number>,
): void {
  let sources = decisionCounters.get(meter);
  if (sources === undefined) {
    const all = new Set<Map<Api.Attributes, number>>();
    sources = all;
    decisionCounters.set(meter, all);
    meter
      .createObservableCounter('sentinel.decisions', {
        description: 'Rate limit decisions, by result, deciding policy, tier and algorithm.',
        unit: '{decision}',
        valueType: api.ValueType.INT,
      })
      .addCallback((result) => {
        // Summed by content: each limiter has attribute sets of its own.
        const sums = new Map<string, { attributes: Api.Attributes; value: number }>();
        for (const source of all) {
          for (const [attributes, value] of source) {
            const key = JSON.stringify(attributes);
            const sum = sums.get(key);
            if (sum === undefined) sums.set(key, { attributes, value });
            else sum.value += value;
          }
        }
        for (const { attributes, value } of sums.values()) result.observe(value, attributes);
      });
  }
  sources.add(counts);
}

/** The algorithm of the deciding policy. */
function algorithmOf(decision: Decision): string {
  for (const policy of decision.policies) {
    if (policy.policy === decision.policy) return policy.algorithm;
  }
  return decision.policies[0]?.algorithm ?? '';
}

function slotAttributes(tier: string | undefined, policy: string): Api.Attributes {
  return { ...(tier !== undefined && { 'sentinel.tier': tier }), 'sentinel.policy': policy };
}

/** `server.address` and `server.port` of a Cluster master's `host:port`; none for one server. */
function serverAttributes(server: string): Api.Attributes {
  const colon = server.lastIndexOf(':');
  if (colon < 0) return {};
  const host = server.slice(0, colon).replace(/^\[(.*)\]$/, '$1');
  return { 'server.address': host, 'server.port': Number(server.slice(colon + 1)) };
}

type Nested<T> = Map<string, T>;

/** The map under `key` in `map`, made on first use. */
function nested<T extends Map<unknown, unknown>>(map: Map<string, T>, key: string): T {
  let inner = map.get(key);
  if (inner === undefined) {
    inner = new Map() as T;
    map.set(key, inner);
  }
  return inner;
}
