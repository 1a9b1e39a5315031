// One ShouldRateLimit call: each descriptor's limit from the configuration, then every enforced
// descriptor decided in one joint consume, all or nothing, and shadowed ones counted beside it.
import {
  type Decision,
  descriptorKey,
  type Limiter,
  type PolicyDecision,
  type PolicyOptions,
} from '@sentinel/core';
import type { MatchedLimit, RateLimitConfig, RateLimitRule, RequestDescriptor } from './types.ts';

export type Code = 'OK' | 'OVER_LIMIT';

/** One descriptor's answer, as a DescriptorStatus carries it. */
export interface DescriptorVerdict {
  readonly code: Code;
  /** The limit that applied: undefined where none matched, or it was unlimited. */
  readonly limit: RateLimitRule | undefined;
  /** Requests left in the window: 0 where no limit matched, 2^32 - 1 where it is unlimited. */
  readonly remaining: number;
  /** Milliseconds until the limit is whole again; 0 where no limit applied. */
  readonly resetMs: number;
  /** The configuration's name for it, for statistics; undefined where none matched. */
  readonly statKey: string | undefined;
  /** Counted, but refused nothing: its own `shadow_mode`, or the global one. */
  readonly shadow: boolean;
  /** Its bucket refused the hits, whether or not shadow mode then answered OK. */
  readonly overLimit: boolean;
}

/** A whole request's answer. */
export interface Verdict {
  readonly overall: Code;
  readonly statuses: readonly DescriptorVerdict[];
  /** A store failure answered by the failure mode: the statuses say what it chose. */
  readonly degraded: boolean;
}

/** A request the service cannot decide: no domain, or no descriptor. */
export class BadRequestError extends Error {
  override readonly name = 'BadRequestError';
}

/** What the verdict reads of a policy's decision. */
type Outcome = Pick<PolicyDecision, 'allowed' | 'remaining' | 'resetMs'>;

/** A descriptor no limit matched: OK, with nothing to say. */
const NO_LIMIT: DescriptorVerdict = {
  code: 'OK',
  limit: undefined,
  remaining: 0,
  resetMs: 0,
  statKey: undefined,
  shadow: false,
  overLimit: false,
};

/**
 * Descriptors in one request at most. Envoy sends one per rate limit action of the route, a
 * handful; a body of /json could carry tens of thousands, and their joint script would hold
 * Redis for as long as it runs.
 */
export const MAX_DESCRIPTORS = 256;

/** What an unlimited descriptor reports left, as the reference service does. */
export const UNLIMITED_REMAINING = 0xffff_ffff;

/** Policy names are 1 to 64 of these; a `rate_limit.name` with others is spelt with `_`. */
const NAME_CHARACTER = /[^A-Za-z0-9_.-]/g;

/**
 * The policy a matched limit counts under: named after `rate_limit.name` (or `rls`), so that a
 * limit's count survives a reload that changes `requests_per_unit`, and an app that counts with
 * the same policy (see docs/rls.md) shares the budget.
 */
export function descriptorPolicy(rule: RateLimitRule): PolicyOptions {
  const name = (rule.name ?? 'rls').replace(NAME_CHARACTER, '_').slice(0, 64) || 'rls';
  return { name, limit: rule.requestsPerUnit, window: rule.windowMs, algorithm: rule.algorithm };
}

export interface DeciderOptions {
  readonly limiter: Limiter;
  /** The configuration in force: read per call, so that a reload applies to the next one. */
  readonly config: () => RateLimitConfig;
  /** SHADOW_MODE: every limit counts, and none refuses. */
  readonly shadowMode: boolean;
  /**
   * Decide each descriptor in a call of its own, as on a Redis Cluster, where the buckets of
   * one request are in different hash slots and no one script can take them all.
   */
  readonly separately: boolean;
}

/**
 * The policy lists of the rule lists seen, kept per rule object in a trie of WeakMaps: a call
 * whose descriptors match the rules of an earlier one hands the limiter the same list, which its
 * plan cache finds by identity rather than by its JSON. A reload makes new rules, and the old
 * lists go with them.
 */
class PolicyLists {
  readonly #root = new WeakMap<RateLimitRule, Node>();

  of(rules: readonly RateLimitRule[]): PolicyOptions[] {
    let level = this.#root;
    let node: Node | undefined;
    for (const rule of rules) {
      node = level.get(rule);
      if (node === undefined) {
        node = { next: new WeakMap(), list: undefined };
        level.set(rule, node);
      }
      level = node.next;
    }
    const found = node as Node;
    found.list ??= rules.map(descriptorPolicy);
    return found.list;
  }
}

interface Node {
  readonly next: WeakMap<RateLimitRule, Node>;
  list: PolicyOptions[] | undefined;
}

export class Decider {
  readonly #options: DeciderOptions;
  readonly #policies = new PolicyLists();

  constructor(options: DeciderOptions) {
    this.#options = options;
  }

  /**
   * Decides a request. `hits[i]` is what descriptor i costs: 0 looks without counting, as a
   * descriptor's own `hits_addend` of 0 asks.
   */
  async decide(
    domain: string,
    descriptors: readonly RequestDescriptor[],
    hits: readonly number[],
  ): Promise<Verdict> {
    if (domain === '') throw new BadRequestError('rate limit domain must not be empty');
    if (descriptors.length === 0) {
      throw new BadRequestError('rate limit descriptor list must not be empty');
    }
    if (descriptors.length > MAX_DESCRIPTORS) {
      throw new BadRequestError(
        `rate limit descriptor list has ${descriptors.length} descriptors, more than the ${MAX_DESCRIPTORS} allowed`,
      );
    }
    const { config, shadowMode, limiter, separately } = this.#options;
    const matched = config().matchAll(domain, descriptors);
    // Enforced limits of one cost are decided together; shadowed ones each on their own, since
    // they refuse nothing and so must not make the others refuse.
    const together = new Map<number, number[]>();
    const alone: number[] = [];
    const outcomes = new Array<Outcome | undefined>(matched.length);
    // A limit of 0 (an unset `requests_per_unit`) refuses everything without asking the store;
    // enforced, it leaves the rest of the request to look without consuming.
    let refused = false;
    matched.forEach((match, i) => {
      if (match === undefined || match.rule.unlimited) return;
      const cost = hits[i] ?? 1;
      const shadowed = shadowMode || match.shadowMode;
      if (match.rule.requestsPerUnit === 0) {
        outcomes[i] = { allowed: false, remaining: 0, resetMs: 0 };
        if (!shadowed) refused = true;
        return;
      }
      if (shadowed || separately) {
        alone.push(i);
        return;
      }
      const group = together.get(cost);
      if (group === undefined) together.set(cost, [i]);
      else group.push(i);
    });
    let degraded = false;
    const take = (indices: readonly number[], decision: Decision) => {
      if (decision.degraded !== undefined) degraded = true;
      indices.forEach((at, j) => {
        outcomes[at] = decision.policies[j];
      });
    };
    const keyOf = (i: number) => descriptorKey(domain, (matched[i] as MatchedLimit).bucket);
    const policiesOf = (indices: readonly number[]) =>
      this.#policies.of(indices.map((i) => (matched[i] as MatchedLimit).rule));
    const calls = alone.map((i) => {
      const cost = refused && !matched[i]?.shadowMode && !shadowMode ? 0 : (hits[i] ?? 1);
      const options = { policies: policiesOf([i]), cost: Math.max(cost, 1) };
      const decided =
        cost === 0 ? limiter.peek(keyOf(i), options) : limiter.consume(keyOf(i), options);
      return decided.then((d) => take([i], d));
    });
    for (const [hit, indices] of together) {
      const cost = refused ? 0 : hit;
      const keys = indices.map(keyOf);
      const options = { policies: policiesOf(indices), cost: Math.max(cost, 1) };
      const decided =
        cost === 0 ? limiter.peekJointly(keys, options) : limiter.consumeJointly(keys, options);
      calls.push(decided.then((d) => take(indices, d)));
    }
    await Promise.all(calls);
    let overall: Code = 'OK';
    const statuses = matched.map((match, i): DescriptorVerdict => {
      if (match === undefined) return NO_LIMIT;
      const { rule, statKey } = match;
      const shadow = shadowMode || match.shadowMode;
      if (rule.unlimited) {
        return { ...NO_LIMIT, remaining: UNLIMITED_REMAINING, statKey, shadow };
      }
      const decision = outcomes[i] as Outcome;
      const over = !decision.allowed;
      // A shadowed limit reports OK however far over it is; the global shadow mode leaves each
      // status as it is and answers OK overall, as the reference service does.
      const code: Code = over && !match.shadowMode ? 'OVER_LIMIT' : 'OK';
      if (code === 'OVER_LIMIT' && !shadowMode) overall = 'OVER_LIMIT';
      return {
        code,
        limit: rule,
        remaining: decision.remaining,
        resetMs: decision.resetMs,
        statKey,
        shadow,
        overLimit: over,
      };
    });
    return { overall, statuses, degraded };
  }
}
