// Concurrency, the twin of lua/concurrency.lua: slots held until released or their lease ends.
import { type Adjust, admitted, type Evaluate, type KeyState, rejected } from './evaluation.ts';

/**
 * The sorted set, as runs of slots taken at one time: `at[i]` (script time) and `count[i]`,
 * in the order their leases end. Slots taken at one time end together and are alike.
 */
export interface ConcurrencyState extends KeyState {
  at: number[];
  count: number[];
}

/** What a renewal does to one policy's state: the twin of LEASES['concurrency']. */
export type Renew<S extends KeyState> = (
  input: { windowMs: number; cost: number; now: number },
  slot: { state: S | undefined },
  at: number,
) => boolean;

/** ZREMRANGEBYSCORE -inf now: leases past their end hold nothing. */
function dropEnded(slot: { state: ConcurrencyState | undefined }, lease: number, now: number) {
  const state = slot.state;
  if (state === undefined) return;
  let ended = 0;
  while (ended < state.at.length && (state.at[ended] as number) + lease <= now) ended++;
  if (ended > 0) {
    state.at.splice(0, ended);
    state.count.splice(0, ended);
  }
  if (state.at.length === 0) slot.state = undefined;
}

function held(state: ConcurrencyState | undefined): number {
  let total = 0;
  if (state !== undefined) for (const n of state.count) total += n;
  return total;
}

/** Takes `cost` slots at `now`; the key lives as long as its last lease. */
function take(
  slot: { state: ConcurrencyState | undefined },
  lease: number,
  cost: number,
  now: number,
) {
  let state = slot.state;
  if (state === undefined) {
    state = { at: [], count: [], expiresAt: now + lease };
    slot.state = state;
  }
  let i = state.at.length;
  while (i > 0 && (state.at[i - 1] as number) > now) i--;
  if (i > 0 && state.at[i - 1] === now) state.count[i - 1] = (state.count[i - 1] as number) + cost;
  else {
    state.at.splice(i, 0, now);
    state.count.splice(i, 0, cost);
  }
  state.expiresAt = Math.max(state.expiresAt, now + lease);
}

/** Gives back up to `cost` slots taken at `at`; how many it found. */
function give(slot: { state: ConcurrencyState | undefined }, cost: number, at: number): number {
  const state = slot.state;
  if (state === undefined) return 0;
  const i = state.at.indexOf(at);
  if (i < 0) return 0;
  const given = Math.min(cost, state.count[i] as number);
  state.count[i] = (state.count[i] as number) - given;
  if (state.count[i] === 0) {
    state.at.splice(i, 1);
    state.count.splice(i, 1);
  }
  if (state.at.length === 0) slot.state = undefined;
  return given;
}

export const concurrency: Evaluate<ConcurrencyState> = (
  { limit, windowMs: lease, cost, now, apply },
  slot,
) => {
  dropEnded(slot, lease, now);
  const state = slot.state;
  const used = held(state);
  const reset = state === undefined ? 0 : (state.at[state.at.length - 1] as number) + lease - now;
  if (used + cost <= limit) {
    if (!apply) return admitted(limit - used, reset);
    take(slot, lease, cost, now);
    return admitted(limit - used - cost, Math.max(reset, lease));
  }
  const remaining = Math.max(0, limit - used);
  if (cost > limit) return rejected(remaining, reset, -1);
  // The slot numbered used + cost - limit in the order leases end (ZRANGE of that index).
  let k = used + cost - limit;
  let i = 0;
  while (k > (state?.count[i] as number)) k -= state?.count[i++] as number;
  return rejected(remaining, reset, (state?.at[i] as number) + lease - now);
};

/**
 * The twin of ADJUSTMENTS['concurrency'], a release: the store releases through
 * `concurrencyRelease`, which answers too, and sends a concurrency policy no refund or penalty.
 */
export const concurrencyAdjust: Adjust<ConcurrencyState> = (
  { windowMs, now },
  slot,
  amount,
  at,
) => {
  dropEnded(slot, windowMs, now);
  if (at !== undefined) give(slot, -amount, at);
};

export const concurrencyRenew: Renew<ConcurrencyState> = ({ windowMs, cost, now }, slot, at) => {
  dropEnded(slot, windowMs, now);
  if (give(slot, cost, at) < cost) return false;
  take(slot, windowMs, cost, now);
  return true;
};

/** A release, answering whether every slot was still held: the twin of a release in `decide`. */
export const concurrencyRelease: Renew<ConcurrencyState> = ({ windowMs, cost, now }, slot, at) => {
  dropEnded(slot, windowMs, now);
  return give(slot, cost, at) === cost;
};
