// RFC 9457 problem details for the responses Sentinel sends itself.
import type { Decision, PolicyDecision } from '../shared/types.ts';
import { formatWindow } from '../shared/window.ts';

export interface ProblemDetails {
  type: string;
  title: string;
  status: number;
  detail: string;
  'violated-policies'?: string[];
  /**
   * 'concurrency' for a refusal by a concurrency policy, too many of the identity's requests in
   * flight; 'shed' for a request shed because the fleet is near its capacity.
   */
  reason?: 'concurrency' | 'shed';
  /** For a cost over a limit: the policy that can never admit it, its limit, and the cost. */
  policy?: string;
  limit?: number;
  cost?: number;
}

/** The problem type the RateLimit header draft defines for exceeded quotas. */
export const QUOTA_EXCEEDED = 'https://iana.org/assignments/http-problem-types#quota-exceeded';

/**
 * The problem type of a request whose cost is larger than a policy's whole limit: no wait ever
 * admits it, so it is not a quota exceeded for now. A name rather than a page to fetch.
 */
export const COST_EXCEEDS_LIMIT = 'urn:sentinel:problem:cost-exceeds-limit';

/**
 * The status of a cost over a limit. Not 429: it promises that waiting helps, and clients retry
 * it. Not 413: it concerns the body's size, and common clients (got, ky) retry it too. 403 says
 * that this request, with these credentials, will not be served, and RFC 9110 §15.5.4 tells
 * clients not to repeat it as it is; a smaller request, or a key of a larger tier, may pass.
 */
export const COST_EXCEEDS_LIMIT_STATUS = 403;

/**
 * The problem type of an identity refused more often than `ban` allows: it is answered 403 until
 * its limits admit it again. A name rather than a page to fetch, as for a cost over a limit.
 */
export const BANNED = 'urn:sentinel:problem:banned';

export function quotaExceeded(decision: Decision, retryAfter: number): ProblemDetails {
  const refusing = decision.policies.filter((p) => !p.allowed);
  const violated = refusing.map((p) => p.policy);
  if (refusing.every((p) => p.algorithm === 'concurrency')) {
    return {
      type: QUOTA_EXCEEDED,
      title: 'Too Many Requests',
      status: 429,
      detail:
        `Too many requests in flight for ${violated.join(', ')}; a slot is free again when one ` +
        `of them finishes, and at the latest in ${retryAfter} s, when its lease ends.`,
      'violated-policies': violated,
      reason: 'concurrency',
    };
  }
  return {
    type: QUOTA_EXCEEDED,
    title: 'Too Many Requests',
    status: 429,
    detail: `Quota exceeded for ${violated.join(', ')}; retry in ${retryAfter} s.`,
    'violated-policies': violated,
  };
}

/**
 * A refusal past the `ban` count: `refusals` 429s were answered within `windowMs` already (none
 * for `ban: 0`).
 */
export function banned(
  decision: Decision,
  refusals: number,
  windowMs: number,
  retryAfter: number,
): ProblemDetails {
  const violated = decision.policies.filter((p) => !p.allowed).map((p) => p.policy);
  const after =
    refusals === 0 ? '' : ` after ${refusals} refusals within ${formatWindow(windowMs)}`;
  return {
    type: BANNED,
    title: 'Forbidden',
    status: 403,
    detail:
      `Quota exceeded for ${violated.join(', ')}${after}: banned until the quota admits a ` +
      `request again, in ${retryAfter} s.`,
    'violated-policies': violated,
  };
}

/**
 * A request costing more than a policy's whole limit: names that policy (the smallest such
 * limit, when several are), its limit and the cost.
 */
export function costExceedsLimit(decision: Decision, cost: number): ProblemDetails {
  const never = decision.policies.filter((p) => p.retryAfterMs === Number.POSITIVE_INFINITY);
  const tightest = never.reduce((a, b) => (b.limit < a.limit ? b : a)) as PolicyDecision;
  return {
    type: COST_EXCEEDS_LIMIT,
    title: 'Cost Exceeds Limit',
    status: COST_EXCEEDS_LIMIT_STATUS,
    detail:
      `This request costs ${cost}, more than the limit of ${tightest.limit} per ` +
      `${formatWindow(tightest.windowMs)} of ${tightest.policy}, so it can never be admitted.`,
    'violated-policies': never.map((p) => p.policy),
    policy: tightest.policy,
    limit: tightest.limit,
    cost,
  };
}

/** The problem type of a request shed while the fleet is near its capacity (`shed`). */
export const SHED = 'urn:sentinel:problem:shed';

/** A request shed: the fleet's requests in flight reached the share kept from critical ones. */
export function shedding(retryAfter: number): ProblemDetails {
  return {
    type: SHED,
    title: 'Service Unavailable',
    status: 503,
    detail:
      'The service is shedding load: it is near its capacity, and what is left is kept for ' +
      `critical requests. Retry later, in ${retryAfter} s at the latest.`,
    reason: 'shed',
  };
}

export function unavailable(): ProblemDetails {
  return {
    type: 'about:blank',
    title: 'Service Unavailable',
    status: 503,
    detail: 'Rate limiting is unavailable, so requests are refused for now.',
  };
}

export function unauthorized(): ProblemDetails {
  return {
    type: 'about:blank',
    title: 'Unauthorized',
    status: 401,
    detail: 'The API key is not recognised.',
  };
}
