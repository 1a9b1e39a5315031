// Fixed window, the twin of lua/fixed-window.lua: a counter per epoch-aligned window.
import { EPOCH_MS } from '../scripts.generated.ts';
import { type Evaluate, report, write } from './state.ts';

export const fixedWindow: Evaluate = (state, limit, window, cost, now, apply, out, at) => {
  const absolute = now + EPOCH_MS;
  const index = Math.floor(absolute / window);
  const endsIn = (index + 1) * window - absolute;
  let used = state !== undefined && state.a >= index ? state.b : 0;
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
