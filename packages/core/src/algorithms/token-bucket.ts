// Token bucket, the twin of lua/token-bucket.lua: fixed-point level plus the time it was taken.
import { divisorOf } from './fixed-point.ts';
import { type Evaluate, report, write } from './state.ts';

export const tokenBucket: Evaluate = (state, limit, window, cost, now, apply, out, at) => {
  const divisor = divisorOf(limit, window);
  const token = window / divisor;
  const rate = limit / divisor;
  const capacity = limit * token;
  let level = capacity;
  let updated = now;
  if (state !== undefined) {
    if (state.b > now) updated = state.b;
    level = Math.min(capacity, state.a + (updated - state.b) * rate);
  }
  const need = cost * token;
  if (level >= need) {
    if (apply) {
      level -= need;
      state = write(state, level, updated, 0, now + Math.ceil((capacity - level) / rate));
    }
    report(out, at, 1, Math.floor(level / token), Math.ceil((capacity - level) / rate), 0);
    return state;
  }
  const retry = need <= capacity ? Math.ceil((need - level) / rate) : -1;
  report(out, at, 0, Math.floor(level / token), Math.ceil((capacity - level) / rate), retry);
  return state;
};
