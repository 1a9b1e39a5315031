// What the service's parts hand each other: a loaded configuration, a request as the service
// reads it off the wire, and the limit each of its descriptors matched.
import type { Algorithm } from '@sentinel/core';

/** The units of envoyproxy/ratelimit's `rate_limit.unit`, in its configuration's spelling. */
export type Unit = 'second' | 'minute' | 'hour' | 'day' | 'week' | 'month' | 'year';

/** Seconds per unit, as envoyproxy/ratelimit counts them: a month is 30 days, a year 365. */
export const UNIT_SECONDS: Readonly<Record<Unit, number>> = {
  second: 1,
  minute: 60,
  hour: 3_600,
  day: 86_400,
  week: 604_800,
  month: 2_592_000,
  year: 31_536_000,
};

/** One `rate_limit` block, checked. */
export interface RateLimitRule {
  /** `rate_limit.name`: what `replaces` refers to. */
  readonly name: string | undefined;
  readonly unit: Unit;
  /** Sentinel's extension `unit_multiplier`: a window of that many units. @default 1 */
  readonly unitMultiplier: number;
  readonly requestsPerUnit: number;
  /**
   * `unlimited: true`: every request is admitted and nothing is counted. Such a rule names no
   * unit; its `unit` says second and means nothing.
   */
  readonly unlimited: boolean;
  /** Sentinel's extension `algorithm`. @default 'fixed-window', aligned to the unit */
  readonly algorithm: Algorithm;
  /** unit × unitMultiplier, in milliseconds. */
  readonly windowMs: number;
}

/** One entry of a request's descriptor. */
export interface DescriptorEntry {
  readonly key: string;
  readonly value: string;
}

/** A descriptor as the request carries it. */
export interface RequestDescriptor {
  readonly entries: readonly DescriptorEntry[];
  /** The per-descriptor override a request may carry in place of the configured limit. */
  readonly limit?: { readonly requestsPerUnit: number; readonly unit: Unit } | undefined;
}

/** The limit one descriptor of a request matched, and how to count it. */
export interface MatchedLimit {
  /**
   * The name envoyproxy/ratelimit gives its statistics: `domain.key_value.key2`, values only
   * where the configuration names one (with `detailed_metric`, every value the request sent).
   * As upstream's `FullKey`: its counters are named after it with `:` and `|` made `_`, and the
   * dots of an IPv4 address too.
   */
  readonly statKey: string;
  /**
   * The entries that name the bucket: the request's, except that under `share_threshold` a
   * value matched by a wildcard is the configured pattern, so every value it matches shares one.
   */
  readonly bucket: readonly DescriptorEntry[];
  readonly rule: RateLimitRule;
  readonly shadowMode: boolean;
  readonly detailedMetric: boolean;
  /**
   * `quota_mode`: a descriptor over its limit refuses the request only if every quota-mode
   * descriptor of the request is over too.
   */
  readonly quotaMode?: boolean;
  /** `metadata`: what upstream returns in the response's dynamic metadata when it admits. */
  readonly metadata?: Readonly<Record<string, unknown>> | undefined;
}

/** A loaded configuration: every domain of every file. */
export interface RateLimitConfig {
  readonly domains: readonly string[];
  /**
   * The limit of each descriptor of a request, in request order: undefined where none matched,
   * and where another matched limit `replaces` the one it matched.
   */
  matchAll(
    domain: string,
    descriptors: readonly RequestDescriptor[],
  ): Array<MatchedLimit | undefined>;
}
