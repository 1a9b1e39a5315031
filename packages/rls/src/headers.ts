// The headers sentinel-rls asks Envoy to add to a decided request (`response_headers_to_add`).
import { type Decision, draft11Headers, type PolicyDecision } from '@sentinel/core';

/** The header styles `RESPONSE_HEADERS` chooses between; the list also defines the type. */
export const HEADER_STYLES = ['draft', 'legacy'] as const;
/**
 * `draft`: the IETF draft-11 `RateLimit-Policy` and `RateLimit` fields. `legacy`: the three
 * fields envoyproxy/ratelimit writes, `RateLimit-Limit`, `RateLimit-Remaining` and
 * `RateLimit-Reset`.
 */
export type HeaderStyle = (typeof HEADER_STYLES)[number];

/** The names of the legacy fields: upstream's `LIMIT_LIMIT_HEADER` and its two siblings. */
export interface LegacyHeaderNames {
  readonly limit: string;
  readonly remaining: string;
  readonly reset: string;
}

/** envoyproxy/ratelimit's default names for the legacy fields. */
export const LEGACY_HEADER_NAMES: LegacyHeaderNames = {
  limit: 'RateLimit-Limit',
  remaining: 'RateLimit-Remaining',
  reset: 'RateLimit-Reset',
};

/**
 * One descriptor's status, as the headers read it. Pass only descriptors that matched a limit:
 * upstream writes nothing for an unlimited descriptor or one that matched none.
 */
export interface HeaderStatus {
  /** A name for the limit, the key of its `RateLimit-Policy` item: its `name`, or its stat key. */
  readonly policy: string;
  /** `requests_per_unit`. */
  readonly limit: number;
  /** `limit_remaining` as the status reports it: 0 for a descriptor over its limit. */
  readonly remaining: number;
  /** The limit's window in seconds: its unit times `unit_multiplier`. */
  readonly windowSeconds: number;
  /** Milliseconds until the window resets: the status's `duration_until_reset`. */
  readonly resetMs: number;
  /**
   * Whether the status's code is OVER_LIMIT. A limit in shadow mode answers OK over its limit,
   * so it is false there, as upstream's code is.
   */
  readonly overLimit: boolean;
}

/** Whole seconds, rounded up: a client told to wait must never come back too early. */
function seconds(ms: number): number {
  return Math.ceil(ms / 1000);
}

/**
 * The status whose numbers upstream writes: the last one over its limit, else the first with
 * the least remaining (service/ratelimit.go keeps the minimum with a strict `<`, and an
 * OVER_LIMIT status replaces it whatever it holds).
 */
function upstreamChoice(statuses: readonly HeaderStatus[]): HeaderStatus | undefined {
  let chosen: HeaderStatus | undefined;
  let least = Number.POSITIVE_INFINITY;
  for (const status of statuses) {
    if (status.remaining < least) {
      chosen = status;
      least = status.remaining;
    }
    if (status.overLimit) {
      chosen = status;
      least = 0;
    }
  }
  return chosen;
}

/**
 * The status the draft's `RateLimit` field reports: of those over their limit, the one that
 * resets last, since its reset is when a retry can pass; else the one with the least remaining.
 * Upstream's pick, the last over its limit, depends on the descriptors' order instead.
 */
function draftChoice(statuses: readonly HeaderStatus[]): HeaderStatus {
  let chosen = statuses[0] as HeaderStatus;
  for (const status of statuses) {
    if (status.overLimit !== chosen.overLimit) {
      if (status.overLimit) chosen = status;
    } else if (
      status.overLimit ? status.resetMs > chosen.resetMs : status.remaining < chosen.remaining
    ) {
      chosen = status;
    }
  }
  return chosen;
}

/** upstream's three fields, named as configured; the reset is in seconds from now. */
function legacyFields(
  statuses: readonly HeaderStatus[],
  names: LegacyHeaderNames,
): Record<string, string> {
  const chosen = upstreamChoice(statuses);
  if (chosen === undefined) return {};
  return {
    [names.limit]: String(chosen.limit),
    [names.remaining]: String(chosen.remaining),
    [names.reset]: String(seconds(chosen.resetMs)),
  };
}

function policyDecision(status: HeaderStatus): PolicyDecision {
  return {
    policy: status.policy,
    // A rate limit of envoyproxy/ratelimit's configuration is never a concurrency policy, the
    // one kind the draft writes differently; which rate algorithm it is changes nothing here.
    algorithm: 'fixed-window',
    allowed: !status.overLimit,
    limit: status.limit,
    windowMs: status.windowSeconds * 1000,
    remaining: status.remaining,
    resetMs: status.resetMs,
    retryAfterMs: status.overLimit ? status.resetMs : 0,
  };
}

/** The draft-11 fields, written by core from a decision that holds every status as a policy. */
function draftFields(statuses: readonly HeaderStatus[]): Record<string, string> {
  if (statuses.length === 0) return {};
  const chosen = draftChoice(statuses);
  const decision: Decision = {
    allowed: !statuses.some((status) => status.overLimit),
    limit: chosen.limit,
    remaining: chosen.remaining,
    resetMs: chosen.resetMs,
    retryAfterMs: chosen.overLimit ? chosen.resetMs : 0,
    policy: chosen.policy,
    policies: statuses.map(policyDecision),
  };
  return draft11Headers(decision);
}

/**
 * The headers for one decided request, in the order to add them; none when no descriptor
 * matched a limit.
 * @example responseHeaders([{ policy: 'api', limit: 10, remaining: 3, windowSeconds: 60,
 *   resetMs: 41_200, overLimit: false }], 'draft')
 *   // { 'RateLimit-Policy': '"api";q=10;w=60', RateLimit: '"api";r=3;t=42' }
 */
export function responseHeaders(
  statuses: readonly HeaderStatus[],
  style: HeaderStyle,
  legacyNames: LegacyHeaderNames = LEGACY_HEADER_NAMES,
): Record<string, string> {
  return style === 'draft' ? draftFields(statuses) : legacyFields(statuses, legacyNames);
}
