// A decision made without the store: what `onStoreError` says, and what a tier nobody gave gets.
import { SentinelError } from '../shared/errors.ts';
import type { Plan } from '../shared/plan.ts';
import type { Decision, StoreErrorMode } from '../shared/types.ts';
import { describe } from '../shared/validation.ts';
import { MemoryStore } from '../stores/memory/memory-store.ts';
import type { IdentityRequest } from '../stores/store-keys.ts';
import { fixedDecision, toDecision } from './decision.ts';

export class FailureMode {
  readonly #mode: StoreErrorMode;
  /** Decides in this process's memory while the store fails, for `onStoreError: 'local'`. */
  readonly #local: MemoryStore | undefined;

  constructor(mode: StoreErrorMode) {
    this.#mode = mode;
    this.#local = mode === 'local' ? new MemoryStore() : undefined;
  }

  /** The decision `onStoreError` makes for a request the store did not decide. */
  decide(plan: Plan, request: IdentityRequest, error?: SentinelError): Decision {
    let decision: Decision;
    if (this.#mode === 'deny') {
      decision = fixedDecision(plan, false, 1000, 'deny');
    } else if (this.#local) {
      // Decided now, which may be a while after the store was asked.
      request.sentAt = Date.now();
      decision = toDecision(plan, this.#local.evaluate(request), 'local');
    } else {
      decision = fixedDecision(plan, true, 0, 'allow');
    }
    if (error) decision.error = error;
    return decision;
  }

  /**
   * Applying some other tier's limits would be a guess, and counting in memory would count under
   * no known policy: the failure mode decides, admitting or refusing, and the decision says so.
   */
  unknownTier(fallback: Plan, error: SentinelError): Decision {
    const deny = this.#mode === 'deny';
    const decision = fixedDecision(fallback, !deny, 1000, deny ? 'deny' : 'allow');
    decision.error = error;
    return decision;
  }

  /** Deletes the keys' state in process memory too, where `'local'` keeps it. */
  async reset(keys: readonly string[]): Promise<void> {
    await this.#local?.reset(keys);
  }

  close(): void {
    this.#local?.close();
  }
}

/** The error a call naming a tier the limiter was not given is reported with. */
export function unknownTierError(tier: unknown): SentinelError {
  return new SentinelError('UNKNOWN_TIER', `No tier named ${describe(tier)}`);
}
