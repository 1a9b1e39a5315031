// Prometheus metrics from the observer events, with prom-client: served as @sentinel/core/prometheus
// (src/prometheus.ts), apart from the main entry, so that prom-client stays an optional peer.
import { Counter, Gauge, type Metric, type Registry, register } from 'prom-client';
import {
  checkObject,
  checkPositiveInteger,
  fail,
  rejectUnknownFields,
} from '../shared/validation.ts';
import { DecisionCounts, NearLimit, StoreDuration } from './metric-counts.ts';
import type { Observer } from './observer.ts';

export interface PrometheusMetricsOptions {
  /** Starts every metric name. @default 'sentinel_' */
  prefix?: string;
  /**
   * Bucket bounds of the store latency histogram, in seconds.
   * @default [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25]
   */
  buckets?: readonly number[];
  /** The share of a limit an identity has used for it to count as near the limit. @default 0.8 */
  nearLimit?: number;
  /** How long an identity's last decision counts towards the near-limit gauge, in ms. @default 60000 */
  nearLimitWindowMs?: number;
  /** Identities the near-limit gauge tracks at most; the oldest are dropped first. @default 10000 */
  maxTrackedIdentities?: number;
}

const OPTION_NAMES = [
  'prefix',
  'buckets',
  'nearLimit',
  'nearLimitWindowMs',
  'maxTrackedIdentities',
] as const satisfies readonly (keyof PrometheusMetricsOptions)[];

const DEFAULT_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25];

/** One observer per registry and prefix: limiters that share a registry share its metrics. */
const observers = new WeakMap<Registry, Map<string, Observer>>();

/**
 * Registers Sentinel's metrics on `registry` (prom-client's default registry if none) and returns
 * the observer that keeps them, for a limiter's or an adapter's `observe` option. Labels are the
 * tier, the policy, the outcome, the server and the error code, never an identity.
 *
 * - `sentinel_decisions_total{tier,policy,outcome}`: outcome is allowed, limited or degraded;
 * - `sentinel_store_duration_seconds`: how long the store took to answer a decision;
 * - `sentinel_store_errors_total{code,server}`;
 * - `sentinel_store_up{server}`: 0 from a server's first failure until it answers again;
 * - `sentinel_breaker_open{server}`: 1 while the circuit breaker skips the server;
 * - `sentinel_near_limit_identities{tier}`: identities whose last decision, within
 *   `nearLimitWindowMs`, found them past `nearLimit` of a limit;
 * - `sentinel_late_refunds_total{tier,outcome}`: consumes answered degraded that Redis had
 *   admitted all the same, given back (outcome refunded) or left taken (failed).
 *
 * @example
 * const registry = new Registry();
 * app.use(rateLimit({ redisUrl, limit: 100, window: '1m', observe: prometheusMetrics(registry) }));
 */
export function prometheusMetrics(
  registry: Registry = register,
  options: PrometheusMetricsOptions = {},
): Observer {
  checkObject(registry, 'registry', 'a prom-client Registry');
  if (typeof (registry as Partial<Registry>).registerMetric !== 'function') {
    fail('registry', 'must be a prom-client Registry');
  }
  const settings = resolveOptions(options);
  let byPrefix = observers.get(registry);
  if (byPrefix === undefined) {
    byPrefix = new Map();
    observers.set(registry, byPrefix);
  }
  const existing = byPrefix.get(settings.prefix);
  if (existing) return existing;
  const observer = observerOf(registerMetrics(registry, settings));
  byPrefix.set(settings.prefix, observer);
  return observer;
}

type Settings = Required<PrometheusMetricsOptions>;

function resolveOptions(options: PrometheusMetricsOptions): Settings {
  checkObject(options, 'options');
  rejectUnknownFields(options, OPTION_NAMES, 'options');
  const {
    prefix = 'sentinel_',
    buckets = DEFAULT_BUCKETS,
    nearLimit = 0.8,
    nearLimitWindowMs = 60_000,
    maxTrackedIdentities = 10_000,
  } = options;
  if (typeof prefix !== 'string' || !/^[a-zA-Z_:][a-zA-Z0-9_:]*$/.test(prefix)) {
    fail('prefix', 'must be a valid start of a Prometheus metric name, such as sentinel_');
  }
  if (
    !Array.isArray(buckets) ||
    buckets.length === 0 ||
    !buckets.every((b) => typeof b === 'number' && b > 0 && Number.isFinite(b))
  ) {
    fail('buckets', 'must be a non-empty array of positive numbers of seconds');
  }
  if (typeof nearLimit !== 'number' || !(nearLimit > 0 && nearLimit <= 1)) {
    fail('nearLimit', 'must be a number above 0 and at most 1, such as 0.8');
  }
  checkPositiveInteger(nearLimitWindowMs, 'nearLimitWindowMs');
  checkPositiveInteger(maxTrackedIdentities, 'maxTrackedIdentities');
  return { prefix, buckets, nearLimit, nearLimitWindowMs, maxTrackedIdentities };
}

/** The metrics an observer keeps, registered on one registry under one prefix. */
interface Metrics {
  readonly decisions: DecisionCounts;
  readonly storeDuration: StoreDuration;
  readonly storeErrors: Counter<'code' | 'server'>;
  readonly storeUp: Gauge<'server'>;
  readonly breakerOpen: Gauge<'server'>;
  readonly lateRefunds: Counter<'tier' | 'outcome'>;
  readonly inFlight: Gauge<'tier' | 'policy'>;
  readonly lapsed: Counter<'tier' | 'policy'>;
  readonly near: NearLimit;
}

/** Declares each metric once, by name, help and labels: a list, longer than a screen. */
function registerMetrics(registry: Registry, settings: Settings): Metrics {
  const { prefix, buckets, nearLimit, nearLimitWindowMs, maxTrackedIdentities } = settings;
  const registers = [registry];
  // Decisions are counted here and handed to prom-client when it collects: its inc() hashes
  // and checks the label set on every call, which would cost as much as a decision in memory.
  const decisions = new DecisionCounts();
  new Counter({
    name: `${prefix}decisions_total`,
    help: 'Rate limit decisions, by tier, deciding policy and outcome (allowed, limited, degraded).',
    labelNames: ['tier', 'policy', 'outcome'] as const,
    registers,
    collect() {
      decisions.flush((labels, count) => this.inc(labels, count));
    },
  });
  const storeDuration = new StoreDuration(`${prefix}store_duration_seconds`, buckets);
  registry.registerMetric(storeDuration as unknown as Metric);
  const near = new NearLimit(nearLimit, nearLimitWindowMs, maxTrackedIdentities);
  new Gauge({
    name: `${prefix}near_limit_identities`,
    help: `Identities whose last decision in the past ${nearLimitWindowMs} ms found them past ${nearLimit * 100}% of a limit.`,
    labelNames: ['tier'] as const,
    registers,
    collect() {
      this.reset();
      for (const [tier, count] of near.countByTier(Date.now())) this.set({ tier }, count);
    },
  });
  return {
    decisions,
    storeDuration,
    near,
    storeErrors: new Counter({
      name: `${prefix}store_errors_total`,
      help: 'Store failures, by error code and server.',
      labelNames: ['code', 'server'] as const,
      registers,
    }),
    storeUp: serverGauge(
      registry,
      `${prefix}store_up`,
      '0 from a store server failing until it answers again, else 1.',
    ),
    breakerOpen: serverGauge(
      registry,
      `${prefix}breaker_open`,
      '1 while the circuit breaker skips a store server, else 0.',
    ),
    lateRefunds: new Counter({
      name: `${prefix}late_refunds_total`,
      help: 'Consumes answered degraded that the store had admitted all the same, by tier and by whether their cost was given back (refunded) or stays taken (failed).',
      labelNames: ['tier', 'outcome'] as const,
      registers,
    }),
    inFlight: new Gauge({
      name: `${prefix}in_flight`,
      help: "Concurrency slots this process's requests hold, by tier and concurrency policy; shed's fleet count is the policy 'fleet' of the tiers shed and shed-critical. Summed over the processes, what is in flight.",
      labelNames: ['tier', 'policy'] as const,
      registers,
    }),
    lapsed: new Counter({
      name: `${prefix}leases_lapsed_total`,
      help: 'Concurrency slots released after their lease had ended, by tier and policy: a request that outlived its lease unrenewed, whose slots others may have had meanwhile.',
      labelNames: ['tier', 'policy'] as const,
      registers,
    }),
  };
}

/** A gauge of one value per store server. */
function serverGauge(registry: Registry, name: string, help: string): Gauge<'server'> {
  return new Gauge({ name, help, labelNames: ['server'] as const, registers: [registry] });
}

/** The observer that keeps `metrics` from the limiter's events. */
function observerOf(metrics: Metrics): Observer {
  const { decisions, storeDuration, storeErrors, storeUp, breakerOpen, lateRefunds, near } =
    metrics;
  const { inFlight, lapsed } = metrics;
  return {
    decision(event) {
      const { decision, outcome, storeMs } = event;
      decisions.add(decision.tier ?? '', decision.policy, outcome);
      const { lease } = decision;
      if (lease !== undefined) {
        for (const policy of lease.policies) {
          inFlight.inc({ tier: decision.tier ?? '', policy }, lease.slots);
        }
      }
      if (storeMs !== undefined) storeDuration.observe(storeMs / 1000);
      if (event.consumed && outcome !== 'degraded') near.saw(event);
    },
    storeError({ server, error }) {
      storeErrors.inc({ code: error.code, server });
    },
    store({ server, state }) {
      storeUp.set({ server }, state === 'up' ? 1 : 0);
    },
    breaker({ server, state }) {
      breakerOpen.set({ server }, state === 'open' ? 1 : 0);
    },
    lateRefund({ tier, error }) {
      lateRefunds.inc({ tier: tier ?? '', outcome: error === undefined ? 'refunded' : 'failed' });
    },
    release(event) {
      for (const policy of event.policies) {
        const labels = { tier: event.tier ?? '', policy };
        inFlight.dec(labels, event.slots);
        if (event.lapsed) lapsed.inc(labels, event.slots);
      }
    },
  };
}
