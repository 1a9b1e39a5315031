// Per-call policies, a tenant's own limits, compiled once per distinct set and kept bounded.

import type { Plan } from '../shared/plan.ts';
import type { TierOptions } from '../shared/types.ts';
import { KeyLayout } from '../stores/store-keys.ts';
import { resolvePlan } from './policy.ts';

/** A set of policies as the request path runs it. */
export interface CompiledPlan {
  readonly plan: Plan;
  readonly layout: KeyLayout;
}

/**
 * Plans for the policies calls bring with them. A lookup cache hands back the same object for a
 * tenant until its answer expires, so the object is looked up first, in a WeakMap that lets go
 * with it; a new object that spells out a set seen before finds it by its contents, among the
 * `max` sets used last. Only a set never seen is checked and compiled, and a bad one throws.
 */
export class PlanCache {
  readonly #prefix: string;
  readonly #max: number;
  readonly #sameNames: boolean;
  readonly #byObject = new WeakMap<object, CompiledPlan>();
  readonly #byContents = new Map<string, CompiledPlan>();

  /** `sameNames`: for joint consumes, whose policies may share names (see resolvePlan). */
  constructor(prefix: string, max = 1000, sameNames = false) {
    this.#prefix = prefix;
    this.#max = max;
    this.#sameNames = sameNames;
  }

  of(policies: TierOptions, tier: string | undefined): CompiledPlan {
    const known = this.#byObject.get(policies);
    if (known !== undefined && known.plan.tier === tier) return known;
    const contents = `${tier ?? ''}\u0000${JSON.stringify(policies)}`;
    let compiled = this.#byContents.get(contents);
    if (compiled === undefined) {
      const plan = resolvePlan(policies, 'policies', tier, this.#sameNames);
      compiled = { plan, layout: new KeyLayout(this.#prefix, plan) };
      if (this.#byContents.size >= this.#max) {
        this.#byContents.delete(this.#byContents.keys().next().value as string);
      }
    } else {
      // Used again: it moves to the back, the last to be dropped.
      this.#byContents.delete(contents);
    }
    this.#byContents.set(contents, compiled);
    this.#byObject.set(policies, compiled);
    return compiled;
  }
}
