// Fixed window, the twin of lua/fixed-window.lua: a counter per epoch-aligned window.
import { EPOCH_MS } from '../scripts.generated.ts';
import { type Evaluate, report, write } from './state.ts';

export const fixedWindow: Evaluate = (state, limit, window, cost, now, apply, out, at) => {
  const absolute = now + EPOCH_MS;
  let index = Math.floor(absolute / window);
  let used = 0;
  if (state !== undefined && state.a >= index) {
    index = state.a;
    used = state.b;
  }
  const endsIn = (index + 1) * window - absolute;
  if (used + cost <= limit) {
    if (apply) {
      used += cost;
      state = write(state, index, used, 0, now + endsIn);
    }
    if (used === 0) report(out, at, 1, limit, 0, 0);
    else report(out, at, 1, limit - used, endsIn, 0);
    return state;
  }
  report(out, at, 0, Math.max(0, limit - used), endsIn, cost <= limit ? endsIn : -1);
  return state;
};
