// RFC 9457 problem details for the responses Sentinel sends itself.
import type { Decision } from '../types.ts';

export interface ProblemDetails {
  type: string;
  title: string;
  status: number;
  detail: string;
  'violated-policies'?: string[];
}

/** The problem type the RateLimit header draft defines for exceeded quotas. */
export const QUOTA_EXCEEDED = 'https://iana.org/assignments/http-problem-types#quota-exceeded';

export function quotaExceeded(decision: Decision, retryAfter: number): ProblemDetails {
  const violated = decision.policies.filter((p) => !p.allowed).map((p) => p.policy);
  return {
    type: QUOTA_EXCEEDED,
    title: 'Too Many Requests',
    status: 429,
    detail: `Quota exceeded for ${violated.join(', ')}; retry in ${retryAfter} s.`,
    'violated-policies': violated,
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
