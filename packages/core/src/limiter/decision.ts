// Turns a store's reply into a decision, and builds the decisions of degraded modes.
import type { SentinelError } from '../shared/errors.ts';
import type { Plan } from '../shared/plan.ts';
import type {
  Decision,
  PolicyDecision,
  PolicyOutcome,
  ResolvedPolicy,
  StoreErrorMode,
  StoreReply,
} from '../shared/types.ts';

/**
 * A decision as the limiter makes it: the public fields, and out of sight (a private field,
 * which neither JSON, spreading nor equality in tests sees) what its consume charged, for a
 * refund. A WeakMap from decisions to charges would cost as much as the decision itself: every
 * admitted consume would add an entry the garbage collector must trace specially.
 */
export class LimiterDecision implements Decision {
  declare tier?: string;
  declare degraded?: StoreErrorMode;
  declare error?: SentinelError;
  #charge: unknown = undefined;

  constructor(
    public allowed: boolean,
    public limit: number,
    public remaining: number,
    public resetMs: number,
    public retryAfterMs: number,
    public policy: string,
    public policies: PolicyDecision[],
  ) {}

  /** What `decision` charged, if the limiter made it and kept one. */
  static chargeOf(decision: Decision): unknown {
    return #charge in decision ? decision.#charge : undefined;
  }

  static keep(decision: Decision, charge: unknown): void {
    if (#charge in decision) decision.#charge = charge;
  }
}

export function toDecision(plan: Plan, reply: StoreReply, degraded?: StoreErrorMode): Decision {
  const { policies } = plan;
  if (policies.length === 1) return singleDecision(plan, reply, degraded);
  const results: PolicyDecision[] = new Array(policies.length);
  const { allowed } = reply;
  // The most restrictive policy: when rejected, the one that blocks longest; when admitted, the
  // one with the least left, and of those the one that takes longest to refill.
  let pick = 0;
  let retryAfterMs = 0;
  for (let i = 0; i < policies.length; i++) {
    const policy = policies[i] as (typeof policies)[number];
    const outcome = reply.policies[i] as PolicyOutcome;
    const result = policyDecision(policy, outcome);
    results[i] = result;
    if (i === 0) {
      if (!allowed) retryAfterMs = result.retryAfterMs;
      continue;
    }
    const best = results[pick] as PolicyDecision;
    if (allowed) {
      if (
        result.remaining < best.remaining ||
        (result.remaining === best.remaining && result.resetMs > best.resetMs)
      ) {
        pick = i;
      }
    } else if (result.retryAfterMs > retryAfterMs) {
      retryAfterMs = result.retryAfterMs;
      pick = i;
    }
  }
  const chosen = results[pick] as PolicyDecision;
  const decision = new LimiterDecision(
    allowed,
    chosen.limit,
    chosen.remaining,
    chosen.resetMs,
    retryAfterMs,
    chosen.policy,
    results,
  );
  if (plan.tier !== undefined) decision.tier = plan.tier;
  if (degraded !== undefined) decision.degraded = degraded;
  return decision;
}

/**
 * The decision of a one-policy plan, the usual kind: the same fields in the same order as the
 * general case builds, without its search for the most restrictive policy.
 */
function singleDecision(plan: Plan, reply: StoreReply, degraded?: StoreErrorMode): Decision {
  const policy = plan.policies[0] as (typeof plan.policies)[number];
  const outcome = reply.policies[0] as PolicyOutcome;
  const { allowed } = reply;
  const decision = new LimiterDecision(
    allowed,
    policy.limit,
    outcome.remaining,
    outcome.resetMs,
    allowed ? 0 : outcome.retryAfterMs,
    policy.name,
    [policyDecision(policy, outcome)],
  );
  if (plan.tier !== undefined) decision.tier = plan.tier;
  if (degraded !== undefined) decision.degraded = degraded;
  return decision;
}

/** A decision made without the store: every policy admits, or every policy refuses. */
export function fixedDecision(
  plan: Plan,
  allowed: boolean,
  retryAfterMs: number,
  degraded: StoreErrorMode,
): Decision {
  const policies = plan.policies.map(
    (policy): PolicyOutcome => ({
      allowed,
      remaining: allowed ? policy.limit : 0,
      resetMs: 0,
      retryAfterMs: allowed ? 0 : retryAfterMs,
    }),
  );
  return toDecision(plan, { allowed, policies }, degraded);
}

/** One policy's part of a decision: the policy, and what the store answered for it. */
function policyDecision(policy: ResolvedPolicy, outcome: PolicyOutcome): PolicyDecision {
  return {
    policy: policy.name,
    algorithm: policy.algorithm,
    allowed: outcome.allowed,
    limit: policy.limit,
    windowMs: policy.windowMs,
    remaining: outcome.remaining,
    resetMs: outcome.resetMs,
    retryAfterMs: outcome.retryAfterMs,
  };
}
