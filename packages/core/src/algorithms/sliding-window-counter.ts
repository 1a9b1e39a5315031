// Sliding window counter, the twin of lua/sliding-window-counter.lua.
import { EPOCH_MS } from '../shared/lua-constants.generated.ts';
import { type Adjust, admitted, type Evaluate, type KeyState, rejected } from './evaluation.ts';
import { mulDiv } from './fixed-point.ts';

/** Stored as "<window_index> <current> <previous>". */
export interface SlidingWindowCounterState extends KeyState {
  /** The current window's index since the Unix epoch. */
  index: number;
  current: number;
  previous: number;
}

/**
 * The twin of ALGORITHMS['sliding-window-counter'], kept in one piece as the script is, so that
 * the two read line for line.
 */
export const slidingWindowCounter: Evaluate<SlidingWindowCounterState> = (
  { limit, windowMs: window, cost, now, apply },
  slot,
) => {
  const absolute = now + EPOCH_MS;
  const state = slot.state;
  let index = Math.floor(absolute / window);
  let current = 0;
  let previous = 0;
  if (state !== undefined) {
    if (state.index >= index) {
      index = state.index;
      current = state.current;
      previous = state.previous;
    } else if (state.index === index - 1) {
      previous = state.current;
    }
  }
  const into = absolute - index * window;
  const elapsed = Math.max(0, into);
  // The previous window's requests still overlapped, rounded up to whole ones.
  const weighted = previous - mulDiv(previous, elapsed, window);
  let allowed = false;
  if (current + weighted + cost <= limit) {
    allowed = true;
    if (apply) current += cost;
  }
  const endsIn = window - into;
  const reset = current > 0 ? endsIn + window : previous > 0 ? endsIn : 0;
  const remaining = Math.max(0, limit - current - weighted);
  if (allowed) {
    if (apply) {
      const expiresAt = now + reset;
      const into = state ?? slot.spare;
      if (into === undefined) {
        slot.state = { index, current, previous, expiresAt };
      } else {
        into.index = index;
        into.current = current;
        into.previous = previous;
        into.expiresAt = expiresAt;
        slot.state = into;
      }
    }
    return admitted(remaining, reset);
  }
  if (cost > limit) return rejected(remaining, reset, -1);
  if (current + cost <= limit) {
    const slide = mulDiv(limit - current - cost, window, previous);
    return rejected(remaining, reset, window - slide - into);
  }
  const slide = mulDiv(limit - cost, window, current);
  return rejected(remaining, reset, endsIn + Math.max(0, window - slide));
};

/**
 * The twin of ADJUSTMENTS['sliding-window-counter']: a refund only into the window charged,
 * while it is the current or the previous one.
 */
export const slidingWindowCounterAdjust: Adjust<SlidingWindowCounterState> = (
  { windowMs: window, now },
  slot,
  amount,
  at,
) => {
  const absolute = now + EPOCH_MS;
  const state = slot.state;
  let index = Math.floor(absolute / window);
  let current = 0;
  let previous = 0;
  if (state !== undefined) {
    if (state.index >= index) {
      index = state.index;
      current = state.current;
      previous = state.previous;
    } else if (state.index === index - 1) {
      previous = state.current;
    }
  }
  if (at === undefined) {
    current += amount;
  } else {
    const charged = Math.floor((at + EPOCH_MS) / window);
    if (charged === index) current = Math.max(0, current + amount);
    else if (charged === index - 1) previous = Math.max(0, previous + amount);
    else return;
  }
  const endsIn = window - (absolute - index * window);
  const reset = current > 0 ? endsIn + window : endsIn;
  slot.state =
    current === 0 && previous === 0
      ? undefined
      : { index, current, previous, expiresAt: now + reset };
};
