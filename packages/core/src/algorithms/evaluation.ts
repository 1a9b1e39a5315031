// What one algorithm's TypeScript twin reads and answers for one policy, in the memory store.
import type { PolicyOutcome } from '../shared/types.ts';

/** The retry of a cost that exceeds the limit. */
const NEVER = -1;

/** A retry as the scripts and their twins write it, -1 for never, as a decision has it. */
export function retryAfterOf(retry: number): number {
  return retry === NEVER ? Number.POSITIVE_INFINITY : retry;
}

/** One policy's part of a request, in the scripts' units: times are ms since EPOCH_MS. */
export interface PolicyInput {
  limit: number;
  windowMs: number;
  cost: number;
  now: number;
  /** false to look without consuming. */
  apply: boolean;
}

/** The in-memory form of one key, as its algorithm keeps it. */
export interface KeyState {
  /** Script time at which the key expires, as PX would set it. */
  expiresAt: number;
}

/**
 * A key's state as the twin finds it, and as it leaves it: the twin replaces `state`, mutates
 * it, or sets it to undefined for a key Redis would not hold. The memory store reuses one slot.
 */
export interface Slot<S extends KeyState> {
  state: S | undefined;
  /**
   * A state of this key's kind that the store holds no more: a twin that creates a state fills
   * this one rather than allocating. Under a flood every new key evicts one, and new objects
   * would outlive young collections and die old, which costs the most to collect.
   */
  spare: S | undefined;
}

/** One algorithm's evaluation of one policy, the twin of its Lua function. */
export type Evaluate<S extends KeyState> = (input: PolicyInput, slot: Slot<S>) => PolicyOutcome;

/**
 * One algorithm's adjustment of one policy, the twin of its ADJUSTMENTS function: takes `amount`
 * as a penalty, or with a negative amount and `at` (script time of the charge) gives it back.
 * Reads `input`'s limit, window and now.
 */
export type Adjust<S extends KeyState> = (
  input: PolicyInput,
  slot: Slot<S>,
  amount: number,
  at: number | undefined,
) => void;

/** The outcome of an admitted request. */
export function admitted(remaining: number, resetMs: number): PolicyOutcome {
  return { allowed: true, remaining, resetMs, retryAfterMs: 0 };
}

/** The outcome of a rejected request; a retry of -1 (never) becomes Infinity, as decoded replies have it. */
export function rejected(remaining: number, resetMs: number, retryMs: number): PolicyOutcome {
  return {
    allowed: false,
    remaining,
    resetMs,
    retryAfterMs: retryAfterOf(retryMs),
  };
}
