// Sliding window counter, the twin of lua/sliding-window-counter.lua.
import { EPOCH_MS } from '../scripts.generated.ts';
import { type Evaluate, report, write } from './state.ts';

export const slidingWindowCounter: Evaluate = (state, limit, window, cost, now, apply, out, at) => {
  const absolute = now + EPOCH_MS;
  let index = Math.floor(absolute / window);
  let current = 0;
  let previous = 0;
  if (state !== undefined) {
    if (state.a >= index) {
      index = state.a;
      current = state.b;
      previous = state.c;
    } else if (state.a === index - 1) {
      previous = state.b;
    }
  }
  const into = absolute - index * window;
  const elapsed = Math.max(0, into);
  const capacity = limit * window;
  const need = cost * window;
  let used = previous * (window - elapsed) + current * window;
  let allowed = 0;
  if (used + need <= capacity) {
    allowed = 1;
    if (apply) {
      current += cost;
      used += need;
    }
  }
  const endsIn = window - into;
  const reset = current > 0 ? endsIn + window : previous > 0 ? endsIn : 0;
  const remaining = Math.max(0, Math.floor((capacity - used) / window));
  if (allowed === 1) {
    if (apply) state = write(state, index, current, previous, now + reset);
    report(out, at, 1, remaining, reset, 0);
  } else if (cost > limit) {
    report(out, at, 0, remaining, reset, -1);
  } else if (current + cost <= limit) {
    const slide = Math.floor(((limit - current - cost) * window) / previous);
    report(out, at, 0, remaining, reset, window - slide - into);
  } else {
    const slide = Math.floor(((limit - cost) * window) / current);
    report(out, at, 0, remaining, reset, endsIn + Math.max(0, window - slide));
  }
  return state;
};
