// ShouldRateLimit's request and response as the service's `decide` sees them: plain objects,
// camelCase, proto3 defaults filled in on the way in and optional on the way out.
import type { DescriptorEntry, Unit } from '../types.ts';

/**
 * A limit's unit: the configuration's spelling, so a request's override compares with a
 * configured limit as is, or 'unknown' for UNKNOWN and for a number no unit has.
 */
export type LimitUnit = Unit | 'unknown';

/** `RateLimitResponse.Code`, by Envoy's names: these are what proto3 JSON and Envoy's logs show. */
export type Code = 'UNKNOWN' | 'OK' | 'OVER_LIMIT';

/** `RateLimitRequest`, as decoded from gRPC or proto3 JSON. */
export interface RateLimitRequestMessage {
  readonly domain: string;
  readonly descriptors: readonly RateLimitDescriptorMessage[];
  /** `hits_addend`: 0 when unset, which envoyproxy/ratelimit counts as 1. */
  readonly hitsAddend: number;
}

/** `envoy.extensions.common.ratelimit.v3.RateLimitDescriptor`. */
export interface RateLimitDescriptorMessage {
  readonly entries: readonly DescriptorEntry[];
  /** `limit`: a limit to apply in place of the configured one; undefined when unset. */
  readonly limit: LimitOverrideMessage | undefined;
  /**
   * `hits_addend`, a UInt64Value: undefined when unset (the request's `hitsAddend` applies), so
   * that a set 0, which checks the limit without counting, stays apart from it.
   */
  readonly hitsAddend: number | undefined;
  /** `is_negative_hits`: the hits give back to the budget instead of taking from it. */
  readonly isNegativeHits: boolean;
}

/**
 * `RateLimitDescriptor.RateLimitOverride`. Its unit is read by number with the response's
 * numbering, as envoyproxy/ratelimit reads it: 7 is 'week' though envoy.type.v3 has no WEEK.
 */
export interface LimitOverrideMessage {
  readonly requestsPerUnit: number;
  readonly unit: LimitUnit;
}

/** `RateLimitResponse`. What is left out goes on the wire as its proto3 default. */
export interface RateLimitResponseMessage {
  readonly overallCode: Code;
  /** One per descriptor of the request, in its order. */
  readonly statuses?: readonly DescriptorStatusMessage[] | undefined;
  readonly responseHeadersToAdd?: readonly HeaderValueMessage[] | undefined;
  readonly requestHeadersToAdd?: readonly HeaderValueMessage[] | undefined;
  /** The body Envoy sends downstream when the code is not OK. */
  readonly rawBody?: Uint8Array | undefined;
  /** `dynamic_metadata`, a google.protobuf.Struct, as the JSON object it stands for. */
  readonly dynamicMetadata?: { readonly [key: string]: JsonValue } | undefined;
  readonly quota?: QuotaMessage | undefined;
}

/** `RateLimitResponse.DescriptorStatus`. */
export interface DescriptorStatusMessage {
  readonly code: Code;
  /** The limit the descriptor matched; left out where none did. */
  readonly currentLimit?: CurrentLimitMessage | undefined;
  /** @default 0 */
  readonly limitRemaining?: number | undefined;
  /** Milliseconds until the window resets, sent as a google.protobuf.Duration. */
  readonly durationUntilResetMs?: number | undefined;
  readonly quota?: QuotaMessage | undefined;
}

/** `RateLimitResponse.RateLimit`. */
export interface CurrentLimitMessage {
  /** @default '' */
  readonly name?: string | undefined;
  readonly requestsPerUnit: number;
  readonly unit: LimitUnit;
}

/** `envoy.config.core.v3.HeaderValue`. */
export interface HeaderValueMessage {
  readonly key: string;
  /** @default '' */
  readonly value?: string | undefined;
  /** The value as bytes, for one that is not valid UTF-8. */
  readonly rawValue?: Uint8Array | undefined;
}

/** `RateLimitResponse.Quota`. */
export interface QuotaMessage {
  readonly requests: number;
  /** `valid_until`, in milliseconds since the epoch, sent as a google.protobuf.Timestamp. */
  readonly validUntilMs?: number | undefined;
  /** @default '' */
  readonly id?: string | undefined;
}

/** A value google.protobuf.Struct can hold. */
export type JsonValue =
  | null
  | boolean
  | number
  | string
  | readonly JsonValue[]
  | { readonly [key: string]: JsonValue };
