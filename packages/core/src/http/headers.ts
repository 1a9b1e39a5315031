// RateLimit headers, one pure function per format; adapters write the record to their response.
import type { Decision, PolicyDecision } from '../shared/types.ts';
import { describe, fail } from '../shared/validation.ts';

/** The header formats Sentinel writes; the list also defines the type. */
export const HEADER_FORMATS = ['draft-11', 'draft-7', 'draft-6', 'legacy'] as const;
export type HeaderFormat = (typeof HEADER_FORMATS)[number];

/** Whole seconds, rounded up: a client told to wait must never come back too early. */
function seconds(ms: number): number {
  return Math.ceil(ms / 1000);
}

/** Printable ASCII without `"` and `\`: a Structured Field String as it stands. */
const PLAIN_SF_STRING = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/**
 * A policy name as a Structured Field String (RFC 9651 §3.3.3): printable ASCII only, with `"`
 * and `\` escaped. Names are validated already; this keeps the header parseable regardless.
 */
export function sfString(value: string): string {
  // Policy names, which are validated, need neither replacement: one test instead of two passes.
  if (PLAIN_SF_STRING.test(value)) return `"${value}"`;
  return `"${value.replace(/[^\x20-\x7e]/g, '').replace(/["\\]/g, '\\$&')}"`;
}

/**
 * Whether a decision knows the state it reports. One the failure mode made without any store
 * (`degraded` 'allow' or 'deny': the store failed, or the tier is unknown) holds placeholder
 * numbers, so the headers send the policies alone and no remaining count or reset: a client must
 * not read a full quota into an outage. The `'local'` mode's in-memory state is real state.
 */
export function knowsState(decision: Decision): boolean {
  return decision.degraded === undefined || decision.degraded === 'local';
}

/** A policy's draft-11 `RateLimit-Policy` item, and its name as a Structured Field String. */
interface PolicyItem {
  readonly limit: number;
  readonly windowMs: number;
  readonly name: string;
  readonly item: string;
}

/**
 * Items by policy name: they depend on the policy alone, and building them per response (the
 * name's test as a Structured Field String, the numbers' formatting) was a tenth of a check on
 * the memory store. Names may be reused with other limits, so an item is used only for its own.
 * Bounded: policies an `identify` brings along have names of its choosing.
 */
const policyItems = new Map<string, PolicyItem>();
const POLICY_ITEMS_KEPT = 1000;

function policyItem({ policy, limit, windowMs, algorithm }: PolicyDecision): PolicyItem {
  const known = policyItems.get(policy);
  if (known !== undefined && known.limit === limit && known.windowMs === windowMs) return known;
  const name = sfString(policy);
  // A concurrency policy's quota is in the draft's own unit, and it has no window: a lease is
  // the longest a slot is held, not a period the quota comes back in.
  const quota =
    algorithm === 'concurrency'
      ? `q=${limit};qu="concurrent-requests"`
      : `q=${limit};w=${seconds(windowMs)}`;
  const item = { limit, windowMs, name, item: `${name};${quota}` };
  if (policyItems.size >= POLICY_ITEMS_KEPT) policyItems.clear();
  policyItems.set(policy, item);
  return item;
}

/** Whether the decision's most restrictive policy is a concurrency policy. */
function holdsSlots(decision: Decision): boolean {
  if (decision.policies.length === 1) return decision.policies[0]?.algorithm === 'concurrency';
  return decision.policies.some(
    (p) => p.policy === decision.policy && p.algorithm === 'concurrency',
  );
}

/** draft-ietf-httpapi-ratelimit-headers-11: every policy, and the most restrictive one's state. */
export function draft11Headers(decision: Decision): Record<string, string> {
  const { policies } = decision;
  const first = policies[0] as PolicyDecision;
  const only = policies.length === 1 ? policyItem(first) : undefined;
  const headers: Record<string, string> = {
    'RateLimit-Policy': only?.item ?? policies.map((p) => policyItem(p).item).join(', '),
  };
  if (knowsState(decision)) {
    // The chosen policy is one of the decision's: its item was just made or found (a single
    // policy's without a second lookup).
    const chosen = only !== undefined && first.policy === decision.policy ? only : undefined;
    const name = (chosen ?? policyItems.get(decision.policy))?.name ?? sfString(decision.policy);
    // No `t` for a concurrency policy: a slot comes back when a request finishes, at no time
    // the server knows (`t` is optional in the draft).
    headers.RateLimit = holdsSlots(decision)
      ? `${name};r=${decision.remaining}`
      : `${name};r=${decision.remaining};t=${seconds(decision.resetMs)}`;
  }
  return headers;
}

function quotaPolicies(decision: Decision): string {
  return decision.policies.map((p) => `${p.limit};w=${seconds(p.windowMs)}`).join(', ');
}

/** draft-ietf-httpapi-ratelimit-headers-07: one `RateLimit` dictionary. */
export function draft7Headers(decision: Decision): Record<string, string> {
  const headers: Record<string, string> = { 'RateLimit-Policy': quotaPolicies(decision) };
  if (knowsState(decision)) {
    headers.RateLimit = `limit=${decision.limit}, remaining=${decision.remaining}, reset=${seconds(decision.resetMs)}`;
  }
  return headers;
}

/**
 * draft-ietf-httpapi-ratelimit-headers-06: separate limit, remaining and reset fields. The limit
 * is the policy's, so it stays when the state is unknown.
 */
export function draft6Headers(decision: Decision): Record<string, string> {
  const headers: Record<string, string> = {
    'RateLimit-Policy': quotaPolicies(decision),
    'RateLimit-Limit': String(decision.limit),
  };
  if (knowsState(decision)) {
    headers['RateLimit-Remaining'] = String(decision.remaining);
    headers['RateLimit-Reset'] = String(seconds(decision.resetMs));
  }
  return headers;
}

/**
 * The X-RateLimit-* headers that predate the drafts; the reset is a Unix time in seconds, from
 * `now`: the limiter's clock, so that it agrees with the decision's own time.
 */
export function legacyHeaders(decision: Decision, now = Date.now()): Record<string, string> {
  const headers: Record<string, string> = { 'X-RateLimit-Limit': String(decision.limit) };
  if (knowsState(decision)) {
    headers['X-RateLimit-Remaining'] = String(decision.remaining);
    headers['X-RateLimit-Reset'] = String(seconds(now + decision.resetMs));
  }
  return headers;
}

/** A format's headers; `clock` is read only by a format that states a time, as legacy does. */
type HeaderWriter = (decision: Decision, clock: () => number) => Record<string, string>;

const WRITERS: Record<HeaderFormat, HeaderWriter> = {
  'draft-11': draft11Headers,
  'draft-7': draft7Headers,
  'draft-6': draft6Headers,
  legacy: (decision, clock) => legacyHeaders(decision, clock()),
};

/**
 * Seconds for `Retry-After`: at least 1, rounded up. Undefined for a cost larger than a policy's
 * limit: no wait admits it, and a `Retry-After` would only invite retries that fail forever.
 */
export function retryAfterSeconds(decision: Decision): number | undefined {
  if (!Number.isFinite(decision.retryAfterMs)) return undefined;
  return Math.max(1, seconds(decision.retryAfterMs));
}

/** Validates a `headers` option once: one IETF draft at most (they share field names), plus legacy. */
export function resolveHeaderFormats(option: unknown): readonly HeaderFormat[] {
  if (option === false) return [];
  const formats = Array.isArray(option) ? option : [option];
  for (const format of formats) {
    if (!HEADER_FORMATS.includes(format as HeaderFormat)) {
      const allowed = HEADER_FORMATS.map((f) => `'${f}'`).join(', ');
      fail(
        'headers',
        `must be false, or one of ${allowed} or a list of them, got ${describe(format)}`,
      );
    }
  }
  if (formats.filter((format) => format !== 'legacy').length > 1) {
    fail('headers', 'may hold one IETF draft, since they share field names');
  }
  return [...new Set(formats as HeaderFormat[])];
}

/** The headers of every chosen format for one decision made at `now` (Unix ms). */
export function rateLimitHeaders(
  decision: Decision,
  formats: readonly HeaderFormat[],
  now = Date.now(),
): Record<string, string> {
  return headersFor(decision, formats, () => now);
}

/**
 * rateLimitHeaders for the request path: the limiter's `clock` is read only when a format needs
 * the time, which the default format does not.
 */
export function headersFor(
  decision: Decision,
  formats: readonly HeaderFormat[],
  clock: () => number,
): Record<string, string> {
  if (formats.length === 1) return WRITERS[formats[0] as HeaderFormat](decision, clock);
  const headers: Record<string, string> = {};
  for (const format of formats) Object.assign(headers, WRITERS[format](decision, clock));
  return headers;
}
