// Sliding window counter, the twin of lua/sliding-window-counter.lua.
import { EPOCH_MS } from '../scripts.generated.ts';
import { admitted, type Evaluate, type KeyState, rejected } from './evaluation.ts';
import { mulDiv } from './fixed-point.ts';

/** Stored as "<window_index> <current> <previous>". */
export interface SlidingWindowCounterState extends KeyState {
  /** The current window's index since the Unix epoch. */
  index: number;
  current: number;
  previous: number;
}

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
      if (state === undefined) {
        slot.state = { index, current, previous, expiresAt };
      } else {
        state.index = index;
        state.current = current;
        state.previous = previous;
        state.expiresAt = expiresAt;
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
