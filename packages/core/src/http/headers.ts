// RateLimit headers, one pure function per format; adapters write the record to their response.
import type { Decision } from '../types.ts';

/** The header formats Sentinel writes; the list also defines the type. */
export const HEADER_FORMATS = ['draft-11', 'draft-7', 'draft-6', 'legacy'] as const;
export type HeaderFormat = (typeof HEADER_FORMATS)[number];

/** Whole seconds, rounded up: a client told to wait must never come back too early. */
function seconds(ms: number): number {
  return Math.ceil(ms / 1000);
}

/**
 * A policy name as a Structured Field String (RFC 9651 §3.3.3): printable ASCII only, with `"`
 * and `\` escaped. Names are validated already; this keeps the header parseable regardless.
 */
export function sfString(value: string): string {
  return `"${value.replace(/[^\x20-\x7e]/g, '').replace(/["\\]/g, '\\$&')}"`;
}

/** draft-ietf-httpapi-ratelimit-headers-11: every policy, and the most restrictive one's state. */
export function draft11Headers(decision: Decision): Record<string, string> {
  return {
    'RateLimit-Policy': decision.policies
      .map((p) => `${sfString(p.policy)};q=${p.limit};w=${seconds(p.windowMs)}`)
      .join(', '),
    RateLimit: `${sfString(decision.policy)};r=${decision.remaining};t=${seconds(decision.resetMs)}`,
  };
}

function quotaPolicies(decision: Decision): string {
  return decision.policies.map((p) => `${p.limit};w=${seconds(p.windowMs)}`).join(', ');
}

/** draft-ietf-httpapi-ratelimit-headers-07: one `RateLimit` dictionary. */
export function draft7Headers(decision: Decision): Record<string, string> {
  return {
    'RateLimit-Policy': quotaPolicies(decision),
    RateLimit: `limit=${decision.limit}, remaining=${decision.remaining}, reset=${seconds(decision.resetMs)}`,
  };
}

/** draft-ietf-httpapi-ratelimit-headers-06: separate limit, remaining and reset fields. */
export function draft6Headers(decision: Decision): Record<string, string> {
  return {
    'RateLimit-Policy': quotaPolicies(decision),
    'RateLimit-Limit': String(decision.limit),
    'RateLimit-Remaining': String(decision.remaining),
    'RateLimit-Reset': String(seconds(decision.resetMs)),
  };
}

/** The X-RateLimit-* headers that predate the drafts; the reset is a Unix time in seconds. */
export function legacyHeaders(decision: Decision, now = Date.now()): Record<string, string> {
  return {
    'X-RateLimit-Limit': String(decision.limit),
    'X-RateLimit-Remaining': String(decision.remaining),
    'X-RateLimit-Reset': String(seconds(now + decision.resetMs)),
  };
}

const WRITERS: Record<HeaderFormat, (decision: Decision) => Record<string, string>> = {
  'draft-11': draft11Headers,
  'draft-7': draft7Headers,
  'draft-6': draft6Headers,
  legacy: legacyHeaders,
};

/**
 * Seconds for `Retry-After`: at least 1, rounded up. A cost no policy can ever admit has no
 * honest answer; it gets the longest window among the refusing policies.
 */
export function retryAfterSeconds(decision: Decision): number {
  if (Number.isFinite(decision.retryAfterMs)) return Math.max(1, seconds(decision.retryAfterMs));
  const windows = decision.policies.filter((p) => !p.allowed).map((p) => p.windowMs);
  return Math.max(1, seconds(Math.max(0, ...windows)));
}

/** Validates a `headers` option once: one IETF draft at most (they share field names), plus legacy. */
export function resolveHeaderFormats(option: unknown): readonly HeaderFormat[] {
  if (option === false) return [];
  const formats = Array.isArray(option) ? option : [option];
  for (const format of formats) {
    if (!HEADER_FORMATS.includes(format as HeaderFormat)) {
      throw new TypeError(
        `@sentinel/core: \`headers\` must be false or among ${HEADER_FORMATS.join(', ')}, got ${String(format)}`,
      );
    }
  }
  if (formats.filter((format) => format !== 'legacy').length > 1) {
    throw new TypeError(
      '@sentinel/core: `headers` may hold one IETF draft, since they share field names',
    );
  }
  return [...new Set(formats as HeaderFormat[])];
}

/** The headers of every chosen format for one decision. */
export function rateLimitHeaders(
  decision: Decision,
  formats: readonly HeaderFormat[],
): Record<string, string> {
  if (formats.length === 1) return WRITERS[formats[0] as HeaderFormat](decision);
  const headers: Record<string, string> = {};
  for (const format of formats) Object.assign(headers, WRITERS[format](decision));
  return headers;
}
