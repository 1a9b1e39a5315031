// Sliding window log, the twin of lua/sliding-window-log.lua: the admitted times, sorted.
import { type Adjust, admitted, type Evaluate, type KeyState, rejected } from './evaluation.ts';

/** The sorted set, as its scores: one admitted time per unit of cost, sorted. */
export interface SlidingWindowLogState extends KeyState {
  times: number[];
}

export const slidingWindowLog: Evaluate<SlidingWindowLogState> = (
  { limit, windowMs: window, cost, now, apply },
  slot,
) => {
  const log = slot.state?.times;
  if (log !== undefined) {
    // ZREMRANGEBYSCORE -inf (now - window)
    let expired = 0;
    while (expired < log.length && (log[expired] as number) <= now - window) expired++;
    if (expired > 0) log.splice(0, expired);
  }
  const used = log?.length ?? 0;
  if (used + cost <= limit) {
    if (apply) {
      const reset = record(slot, window, cost, now);
      return admitted(Math.max(0, limit - used - cost), reset);
    }
    if (used === 0) {
      slot.state = undefined;
      return admitted(limit, 0);
    }
  }
  const reset = used > 0 ? (log?.[used - 1] as number) + window - now : 0;
  const remaining = Math.max(0, limit - used);
  // An emptied set is a deleted key in Redis.
  if (used === 0) slot.state = undefined;
  if (used + cost <= limit) return admitted(remaining, reset);
  if (cost > limit) return rejected(remaining, reset, -1);
  return rejected(remaining, reset, (log?.[used + cost - limit - 1] as number) + window - now);
};

/** Records `cost` entries at `now`; returns the ms until the newest leaves the window. */
function record(
  slot: { state: SlidingWindowLogState | undefined },
  window: number,
  cost: number,
  now: number,
): number {
  const entries = slot.state?.times ?? [];
  // ZADD keeps the set sorted; times only go backwards if the clock does.
  let position = entries.length;
  while (position > 0 && (entries[position - 1] as number) > now) position--;
  const later = entries.splice(position);
  for (let i = 0; i < cost; i++) entries.push(now);
  for (const time of later) entries.push(time);
  // The newest entry is later than now only if the clock stepped back.
  const reset = (entries[entries.length - 1] as number) + window - now;
  if (slot.state === undefined) slot.state = { times: entries, expiresAt: now + reset };
  else slot.state.expiresAt = now + reset;
  return reset;
}

/**
 * The twin of ADJUSTMENTS['sliding-window-log']: a penalty records at most `limit` entries at
 * now; a refund removes entries at the time charged, while they are in the window.
 */
export const slidingWindowLogAdjust: Adjust<SlidingWindowLogState> = (
  { limit, windowMs: window, now },
  slot,
  amount,
  at,
) => {
  const log = slot.state?.times;
  if (log !== undefined) {
    let expired = 0;
    while (expired < log.length && (log[expired] as number) <= now - window) expired++;
    if (expired > 0) log.splice(0, expired);
    if (log.length === 0) slot.state = undefined;
  }
  if (at === undefined) {
    record(slot, window, Math.min(amount, limit), now);
    return;
  }
  const times = slot.state?.times;
  if (times === undefined) return;
  let left = -amount;
  for (let i = times.length - 1; i >= 0 && left > 0; i--) {
    if (times[i] === at) {
      times.splice(i, 1);
      left--;
    }
  }
  // An emptied set is a deleted key in Redis.
  if (times.length === 0) slot.state = undefined;
};
