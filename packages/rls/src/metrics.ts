// sentinel-rls's statistics, counted as envoyproxy/ratelimit counts them, in the Prometheus text format.

/** What one descriptor's decision tells the statistics. */
export interface DescriptorOutcome {
  /** The request's `hits_addend` for this descriptor (0 is allowed, as upstream allows it). */
  readonly hits: number;
  /** The matched limit's `requests_per_unit`. */
  readonly limit: number;
  /**
   * What the bucket admits after the decision: after taking the hits when it admitted them,
   * untouched when it refused them (Sentinel does not count refused hits).
   */
  readonly remaining: number;
  /** Whether the bucket refused the hits, shadow mode or not. */
  readonly overLimit: boolean;
  /** The limit's `shadow_mode`: OK was answered over the limit, and shadow_mode counts it. */
  readonly shadowMode: boolean;
}

/** The methods whose requests are timed: the gRPC call, and the /json endpoint. */
export type RequestMethod = 'ShouldRateLimit' | 'json';

export interface RlsMetricsOptions {
  /** `NEAR_LIMIT_RATIO`. @default 0.8 */
  readonly nearLimitRatio?: number;
  /**
   * Series of per-limit counters kept at most: past it, every new one counts under one
   * `overflow="true"` series, so that callers sending endless descriptor values cannot grow
   * memory without end. @default 10_000
   */
  readonly maxSeries?: number;
}

/** The per-limit counters, by their name upstream's statistic paths end in. */
export const STATS = [
  'total_hits',
  'over_limit',
  'near_limit',
  'within_limit',
  'shadow_mode',
] as const;
export type Stat = (typeof STATS)[number];

export const STAT_HELP: Readonly<Record<Stat, string>> = {
  total_hits: 'Hits of each limit: the sum of hits_addend.',
  over_limit: 'Hits over the limit.',
  near_limit: 'Hits past NEAR_LIMIT_RATIO of the limit but not over it.',
  within_limit: 'Hits within the limit.',
  shadow_mode: 'Hits over a shadow_mode limit, which answered OK.',
};

/**
 * A series' labels as attributes: `domain`, `key1` and, for a deeper stat key, `key2`; or
 * `overflow` alone for the series past `maxSeries`.
 */
export type StatAttributes =
  | { readonly domain: string; readonly key1: string; readonly key2?: string }
  | { readonly overflow: true };

/** One series: its labels, written once, and a count per statistic. */
interface Series {
  readonly labels: string;
  readonly attributes: StatAttributes;
  readonly counts: Record<Stat, number>;
}

/** Every count as it stands, for a reader other than {@link RlsMetrics.render}. */
export interface RlsCounts {
  readonly series: ReadonlyArray<{
    readonly attributes: StatAttributes;
    readonly counts: Readonly<Record<Stat, number>>;
  }>;
  /** Requests served, by method. */
  readonly requests: ReadonlyArray<readonly [RequestMethod, number]>;
  readonly serviceErrors: number;
  readonly storeErrors: number;
  readonly globalShadowMode: number;
}

/**
 * Response time buckets in seconds. Finer than a statsd exporter's default (5 ms up): a
 * decision's Redis call has a 50 ms deadline, so the interesting spread is below it.
 */
export const TIME_BUCKETS: readonly number[] = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
];

interface Timing {
  count: number;
  sum: number;
  /** Per bucket of TIME_BUCKETS, not cumulative: summed when written. */
  readonly buckets: number[];
}

/** A label value in the text format: `\`, `"` and line feeds escaped. */
function labelValue(value: string): string {
  return value.replace(/[\\"\n]/g, (c) => (c === '\n' ? '\\n' : `\\${c}`));
}

/** Upstream's SanitizeStatName: `:` and `|` become `_`, and so do the dots of an IPv4 address. */
function sanitize(statKey: string): string {
  return statKey
    .replace(/[:|]/g, '_')
    .replace(/\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}/g, (ip) => ip.replaceAll('.', '_'));
}

/**
 * A label's value at most: under `detailed_metric` a value is whatever the request carried, and
 * 10,000 series of header-sized labels would hold gigabytes.
 */
const MAX_LABEL = 256;

/**
 * A stat key's labels as upstream's Prometheus mapping gives them: `domain`, then `key1` and
 * `key2` for the next two dot-separated parts. Deeper parts are dropped there, and their hits
 * add up in the series of the first three parts, here as well.
 */
function attributesOf(statKey: string): StatAttributes {
  const [domain = '', key1 = '', key2] = sanitize(statKey)
    .split('.', 3)
    .map((part) => part.slice(0, MAX_LABEL));
  return key2 === undefined ? { domain, key1 } : { domain, key1, key2 };
}

function labelsOf(attributes: StatAttributes): string {
  return Object.entries(attributes)
    .map(([name, value]) => `${name}="${labelValue(String(value))}"`)
    .join(',');
}

function zeroCounts(): Record<Stat, number> {
  return { total_hits: 0, over_limit: 0, near_limit: 0, within_limit: 0, shadow_mode: 0 };
}

function counter(name: string, help: string, lines: string[]): void {
  lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} counter`);
}

/**
 * The service's counters. The engine calls {@link record} once per descriptor that matched a
 * limit (not for an unlimited one), {@link storeError} for a decision the failure mode answered,
 * and {@link render} serves them at /metrics. Names are those upstream's statsd exporter mapping
 * gives: `ratelimit_service_rate_limit_<stat>{domain, key1, key2}`.
 */
export class RlsMetrics {
  readonly #nearLimitRatio: number;
  readonly #maxSeries: number;
  readonly #series = new Map<string, Series>();
  /** Stat keys to their series: several keys may name one (their labels sanitised alike). */
  readonly #byStatKey = new Map<string, Series>();
  readonly #overflow: Series = {
    labels: 'overflow="true"',
    attributes: { overflow: true },
    counts: zeroCounts(),
  };
  #overflowed = false;
  readonly #timings = new Map<RequestMethod, Timing>();
  #storeErrors = 0;
  #serviceErrors = 0;
  #globalShadowMode = 0;
  readonly #requestListeners: Array<(method: RequestMethod, seconds: number) => void> = [];

  constructor({ nearLimitRatio = 0.8, maxSeries = 10_000 }: RlsMetricsOptions = {}) {
    if (!(nearLimitRatio >= 0 && nearLimitRatio <= 1)) {
      throw new TypeError(`RlsMetrics: nearLimitRatio must be from 0 to 1, got ${nearLimitRatio}`);
    }
    if (!Number.isSafeInteger(maxSeries) || maxSeries < 1) {
      throw new TypeError(`RlsMetrics: maxSeries must be a positive integer, got ${maxSeries}`);
    }
    // Upstream keeps the ratio as a float32 and multiplies in float32: a limit of 10 at 0.8 is
    // near from 8, not 7, only because float32(0.8) is a little over 0.8.
    this.#nearLimitRatio = Math.fround(nearLimitRatio);
    this.#maxSeries = maxSeries;
  }

  #seriesOf(statKey: string): Series {
    // By the stat key first: the labels are parsed out of it once, not on every call.
    const known = this.#byStatKey.get(statKey);
    if (known !== undefined) return known;
    const attributes = attributesOf(statKey);
    const labels = labelsOf(attributes);
    let series = this.#series.get(labels);
    if (series === undefined) {
      if (this.#series.size >= this.#maxSeries) {
        this.#overflowed = true;
        return this.#overflow;
      }
      series = { labels, attributes, counts: zeroCounts() };
      this.#series.set(labels, series);
    }
    // Bounded too: keys that sanitise alike could otherwise grow it without end.
    if (this.#byStatKey.size < 2 * this.#maxSeries && statKey.length <= 4 * MAX_LABEL) {
      this.#byStatKey.set(statKey, series);
    }
    return series;
  }

  /**
   * Counts one descriptor's hits as upstream's base limiter does. It sees a counter go from
   * `before` to `after = before + hits`; hits past the limit are over_limit, hits past the near
   * threshold but within the limit near_limit, and a refusal that began under the limit counts
   * its hits between the two as near_limit as well.
   */
  record(statKey: string, outcome: DescriptorOutcome): void {
    const { hits, limit, remaining, overLimit, shadowMode } = outcome;
    const counts = this.#seriesOf(statKey).counts;
    counts.total_hits += hits;
    const used = Math.max(0, limit - remaining);
    const before = overLimit ? used : Math.max(0, used - hits);
    const after = before + hits;
    const near = Math.floor(Math.fround(Math.fround(limit) * this.#nearLimitRatio));
    if (overLimit) {
      const over = before >= limit ? hits : Math.max(0, after - limit);
      counts.over_limit += over;
      if (before < limit) counts.near_limit += limit - Math.max(near, before);
      if (shadowMode) counts.shadow_mode += over;
    } else {
      if (after > near) counts.near_limit += before >= near ? hits : after - near;
      counts.within_limit += hits;
    }
  }

  /** A decision the failure mode answered, because the store failed or was too slow. */
  storeError(): void {
    this.#storeErrors++;
  }

  /** A request refused as malformed: upstream's `service_error`. */
  serviceError(): void {
    this.#serviceErrors++;
  }

  /** A request over its limit that SHADOW_MODE answered OK. */
  globalShadowMode(): void {
    this.#globalShadowMode++;
  }

  /** One request served, and how long it took in seconds. */
  request(method: RequestMethod, seconds: number): void {
    let timing = this.#timings.get(method);
    if (timing === undefined) {
      timing = { count: 0, sum: 0, buckets: TIME_BUCKETS.map(() => 0) };
      this.#timings.set(method, timing);
    }
    timing.count++;
    timing.sum += seconds;
    const bucket = TIME_BUCKETS.findIndex((le) => seconds <= le);
    if (bucket !== -1) (timing.buckets[bucket] as number)++;
    for (const listener of this.#requestListeners) listener(method, seconds);
  }

  /** Calls `listener` with each request served, after counting it. */
  onRequest(listener: (method: RequestMethod, seconds: number) => void): void {
    this.#requestListeners.push(listener);
  }

  /** Every count as it stands: the series, requests by method, and the errors. */
  counts(): RlsCounts {
    const series = [...this.#series.values()];
    if (this.#overflowed) series.push(this.#overflow);
    return {
      series,
      requests: [...this.#timings].map(([method, timing]) => [method, timing.count] as const),
      serviceErrors: this.#serviceErrors,
      storeErrors: this.#storeErrors,
      globalShadowMode: this.#globalShadowMode,
    };
  }

  /** Every counter in the Prometheus text format 0.0.4. */
  render(): string {
    const lines: string[] = [];
    const all = [...this.#series.values()];
    if (this.#overflowed) all.push(this.#overflow);
    for (const stat of STATS) {
      const name = `ratelimit_service_rate_limit_${stat}`;
      counter(name, STAT_HELP[stat], lines);
      for (const series of all) lines.push(`${name}{${series.labels}} ${series.counts[stat]}`);
    }
    this.#renderRequests(lines);
    counter('ratelimit_service_should_rate_limit_error', 'Requests that failed, by cause.', lines);
    lines.push(
      `ratelimit_service_should_rate_limit_error{err_type="service_error"} ${this.#serviceErrors}`,
    );
    counter('ratelimit_service_global_shadow_mode', 'Requests SHADOW_MODE answered OK.', lines);
    lines.push(`ratelimit_service_global_shadow_mode ${this.#globalShadowMode}`);
    counter(
      'sentinel_rls_store_errors_total',
      'Decisions answered by FAILURE_MODE because the store failed.',
      lines,
    );
    lines.push(`sentinel_rls_store_errors_total ${this.#storeErrors}`);
    return `${lines.join('\n')}\n`;
  }

  #renderRequests(lines: string[]): void {
    counter('ratelimit_service_total_requests', 'Requests served, by method.', lines);
    for (const [method, timing] of this.#timings) {
      lines.push(`ratelimit_service_total_requests{grpc_method="${method}"} ${timing.count}`);
    }
    const name = 'ratelimit_service_response_time_seconds';
    lines.push(`# HELP ${name} Time to answer a request, by method.`, `# TYPE ${name} histogram`);
    for (const [method, timing] of this.#timings) {
      let cumulative = 0;
      TIME_BUCKETS.forEach((le, i) => {
        cumulative += timing.buckets[i] as number;
        lines.push(`${name}_bucket{grpc_method="${method}",le="${le}"} ${cumulative}`);
      });
      lines.push(
        `${name}_bucket{grpc_method="${method}",le="+Inf"} ${timing.count}`,
        `${name}_sum{grpc_method="${method}"} ${timing.sum}`,
        `${name}_count{grpc_method="${method}"} ${timing.count}`,
      );
    }
  }
}
