// What an adapter does with a request: pass it on with headers, or answer it with a problem.
import type { Decision } from '../shared/types.ts';
import { type HeaderFormat, headersFor, retryAfterSeconds } from './headers.ts';
import {
  banned,
  COST_EXCEEDS_LIMIT_STATUS,
  costExceedsLimit,
  type ProblemDetails,
  quotaExceeded,
  shedding,
  unauthorized,
  unavailable,
} from './problem.ts';

/** Why a request is answered instead of passed on; each reason has one status. */
export type RefusalReason =
  | 'limited'
  | 'banned'
  | 'cost-exceeds-limit'
  | 'unauthorized'
  | 'unavailable'
  | 'shed';

/** What the adapter should do with a request. */
export type Verdict =
  | {
      action: 'next';
      headers: Record<string, string>;
      decision: Decision | undefined;
      /** The slot of the fleet's the request holds under `shed`, released with its response. */
      fleet?: Decision;
      /**
       * The decision of the budget an identity is counted within (its client IP's, say), when it
       * holds concurrency slots too: released with the response.
       */
      within?: Decision;
    }
  | {
      action: 'respond';
      /**
       * Over the limit for now (429, with `Retry-After`); over it past the `ban` count (403, with
       * `Retry-After`); a cost larger than a policy's whole limit, which no wait admits (403,
       * without `Retry-After`); an API key the lookup rejected (401); or failing closed (503). A
       * custom `handler` may answer the first three.
       */
      reason: RefusalReason;
      status: 401 | 403 | 429 | 503;
      headers: Record<string, string>;
      body: ProblemDetails;
      decision: Decision | undefined;
    };

const NO_HEADERS: Record<string, string> = Object.freeze({}) as Record<string, string>;

/** A request skipped, allow-listed, or passed by a failure before any decision. */
export const LEFT_ALONE: Verdict = Object.freeze({
  action: 'next',
  headers: NO_HEADERS,
  decision: undefined,
});

/** A key the lookup rejected; shadow mode never gets here. */
export function rejectedKey(): Verdict {
  return {
    action: 'respond',
    reason: 'unauthorized',
    status: 401,
    headers: NO_HEADERS,
    body: unauthorized(),
    decision: undefined,
  };
}

/** A request shed by the fleet's count (`shed`): 503, retried once a slot's lease ends at the latest. */
export function shed(fleet: Decision): Verdict {
  const retryAfter = retryAfterSeconds(fleet) ?? 1;
  return {
    action: 'respond',
    reason: 'shed',
    status: 503,
    headers: { 'Retry-After': String(retryAfter) },
    body: shedding(retryAfter),
    decision: fleet,
  };
}

/** A failure before any decision (identify, cost or skip), when failing closed. */
export function failedClosed(): Verdict {
  return {
    action: 'respond',
    reason: 'unavailable',
    status: 503,
    headers: { 'Retry-After': '1' },
    body: unavailable(),
    decision: undefined,
  };
}

export interface VerdictSettings {
  formats: readonly HeaderFormat[];
  /** Shadow mode: every refusal passes, with the headers it would have had. */
  shadow: boolean;
}

/** A refusal past the `ban` count: how many 429s came before, within which window. */
export interface Ban {
  refusals: number;
  windowMs: number;
}

/**
 * The verdict on a decision for a request of `cost` units, `now` the limiter's clock, and
 * `ban` set for a refusal past the ban count. A refusal keeps its headers in shadow mode, so that
 * they show what enforcing would answer.
 */
export function verdictOn(
  decision: Decision,
  cost: number,
  { formats, shadow }: VerdictSettings,
  now: () => number,
  ban?: Ban,
): Verdict {
  const headers = formats.length === 0 ? {} : headersFor(decision, formats, now);
  const retryAfter = retryAfterSeconds(decision);
  if (!decision.allowed && retryAfter !== undefined) headers['Retry-After'] = String(retryAfter);
  if (decision.allowed || shadow) return { action: 'next', headers, decision };
  const refuse = (
    reason: RefusalReason,
    status: 403 | 429 | 503,
    body: ProblemDetails,
  ): Verdict => ({ action: 'respond', reason, status, headers, body, decision });
  if (decision.degraded === 'deny') return refuse('unavailable', 503, unavailable());
  if (retryAfter === undefined) {
    return refuse(
      'cost-exceeds-limit',
      COST_EXCEEDS_LIMIT_STATUS,
      costExceedsLimit(decision, cost),
    );
  }
  if (ban !== undefined) {
    return refuse('banned', 403, banned(decision, ban.refusals, ban.windowMs, retryAfter));
  }
  return refuse('limited', 429, quotaExceeded(decision, retryAfter));
}
