// The opt-in local block cache: an identity the store has just refused is refused in process
// until its retry time, so an abusive client stops costing Redis a call per request.
import type { Plan } from '../shared/plan.ts';
import type { Decision, PolicyDecision } from '../shared/types.ts';
import { checkObject, checkPositiveInteger, rejectUnknownFields } from '../shared/validation.ts';

export interface BlockCacheOptions {
  /** Refused identities remembered at most; past it the oldest is forgotten. @default 10_000 */
  maxKeys?: number;
}

interface Block {
  /** When the store's retry time has passed, on the limiter's clock. */
  readonly until: number;
  /** The cost it refused: a cheaper request may fit sooner, so it still asks the store. */
  readonly cost: number;
  readonly at: number;
  readonly decision: Decision;
}

/**
 * Only ever refuses, and only for as long as the store said it would: a cached answer never
 * admits what the store would refuse. A reset on this limiter forgets the identity; a reset
 * elsewhere is seen when the retry time passes.
 */
/**
 * The block of one key under one plan. Plans whose policies share names and algorithms share
 * state keys, and so their blocks.
 */
export function blockId(plan: Plan, key: string): string {
  return `${plan.keySuffixes.join('')}\u0000${key}`;
}

export class BlockCache {
  readonly #blocks = new Map<string, Block>();
  readonly #maxKeys: number;

  constructor(maxKeys: number) {
    this.#maxKeys = maxKeys;
  }

  /** The refusal to answer `cost` with at `now`, or undefined to ask the store. */
  refusal(id: string, cost: number, now: number): Decision | undefined {
    const block = this.#blocks.get(id);
    if (block === undefined) return undefined;
    if (now >= block.until) {
      this.#blocks.delete(id);
      return undefined;
    }
    return cost >= block.cost ? aged(block.decision, now - block.at) : undefined;
  }

  /** Remembers a refusal the store made with a known retry time. */
  remember(id: string, cost: number, now: number, decision: Decision): void {
    const { retryAfterMs } = decision;
    if (decision.allowed || decision.degraded || !(retryAfterMs > 0 && retryAfterMs < Infinity)) {
      return;
    }
    this.#blocks.delete(id);
    if (this.#blocks.size >= this.#maxKeys) {
      this.#blocks.delete(this.#blocks.keys().next().value as string);
    }
    this.#blocks.set(id, { until: now + retryAfterMs, cost, at: now, decision });
  }

  forget(id: string): void {
    this.#blocks.delete(id);
  }
}

/** The decision as it stands `elapsed` ms later: every wait is that much shorter. */
function aged(decision: Decision, elapsed: number): Decision {
  const less = (ms: number) => Math.max(0, ms - elapsed);
  const policies = decision.policies.map(
    (policy): PolicyDecision => ({
      ...policy,
      resetMs: less(policy.resetMs),
      retryAfterMs: less(policy.retryAfterMs),
    }),
  );
  return {
    ...decision,
    resetMs: less(decision.resetMs),
    retryAfterMs: less(decision.retryAfterMs),
    policies,
  };
}

/** `blockCache: true | { maxKeys }` as a cache, or undefined when off. */
export function resolveBlockCache(option: unknown): BlockCache | undefined {
  if (option === undefined || option === false) return undefined;
  if (option === true) return new BlockCache(10_000);
  checkObject(option, 'blockCache', 'true, false or { maxKeys }');
  rejectUnknownFields(option, ['maxKeys'], 'blockCache');
  const { maxKeys = 10_000 } = option as BlockCacheOptions;
  checkPositiveInteger(maxKeys, 'blockCache.maxKeys');
  return new BlockCache(maxKeys);
}
