// The first step of a decision: which policies a call runs, and under which keys.
import type { Plan } from '../shared/plan.ts';
import type { TierOptions } from '../shared/types.ts';
import { describe, fail } from '../shared/validation.ts';
import { KeyLayout } from '../stores/store-keys.ts';
import { type CompiledPlan, PlanCache } from './plan-cache.ts';

/**
 * The limiter's plans, each with its keys under the limiter's prefix: the fallback, for calls
 * that name no tier, each tier's, and those of the policies calls bring with them, compiled once
 * per distinct set. Looked up without building anything on the way.
 */
export class Plans {
  readonly fallback: CompiledPlan;
  readonly #tiers = new Map<string, CompiledPlan>();
  readonly #own: PlanCache;
  readonly #jointOwn: PlanCache;

  constructor(prefix: string, fallback: Plan, tiers: ReadonlyMap<string, Plan>) {
    this.fallback = { plan: fallback, layout: new KeyLayout(prefix, fallback) };
    for (const [tier, plan] of tiers) {
      this.#tiers.set(tier, { plan, layout: new KeyLayout(prefix, plan) });
    }
    this.#own = new PlanCache(prefix);
    this.#jointOwn = new PlanCache(prefix, 1000, true);
  }

  /**
   * A call's plan: its own policies' (checked and compiled the first time a set is seen, a bad
   * one throwing a TypeError), its tier's, or the fallback; undefined for a tier the limiter was
   * not given.
   */
  of(tier: string | undefined, own: TierOptions | undefined): CompiledPlan | undefined {
    if (own !== undefined) return this.#own.of(own, tier);
    return tier === undefined ? this.fallback : this.#tiers.get(tier);
  }

  /** A joint consume's plan: as `of`, but its own policies may share names. */
  ofJoint(tier: string | undefined, own: TierOptions | undefined): CompiledPlan | undefined {
    return own === undefined ? this.of(tier, own) : this.#jointOwn.of(own, tier);
  }

  /** The plans of one tier, or of every tier and the fallback: what a reset deletes. */
  ofTier(tier: string | undefined): CompiledPlan[] | undefined {
    if (tier === undefined) return [this.fallback, ...this.#tiers.values()];
    const compiled = this.#tiers.get(tier);
    return compiled && [compiled];
  }
}

/** A key as every call takes it: a string, or a TypeError. */
export function checkKey(key: unknown): asserts key is string {
  if (typeof key !== 'string') fail('key', `must be a string, got ${describe(key)}`);
}
