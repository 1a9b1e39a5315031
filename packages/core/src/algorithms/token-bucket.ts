// Token bucket, the twin of lua/token-bucket.lua: fixed-point level plus the time it was taken.
import { type Evaluate, report, write } from './state.ts';

export const tokenBucket: Evaluate = (state, limit, window, cost, now, apply, out, at) => {
  const capacity = limit * window;
  let level = capacity;
  let updated = now;
  if (state !== undefined) {
    if (state.b > now) updated = state.b;
    level = Math.min(capacity, state.a + (updated - state.b) * limit);
  }
  const need = cost * window;
  if (level >= need) {
    if (apply) {
      level -= need;
      state = write(state, level, updated, 0, now + Math.ceil((capacity - level) / limit));
    }
    report(out, at, 1, Math.floor(level / window), Math.ceil((capacity - level) / limit), 0);
    return state;
  }
  const retry = need <= capacity ? Math.ceil((need - level) / limit) : -1;
  report(out, at, 0, Math.floor(level / window), Math.ceil((capacity - level) / limit), retry);
  return state;
};
