// GCRA, the twin of lua/gcra.lua: one theoretical arrival time, kept as whole ms plus a fraction.
import { divisorOf } from './fixed-point.ts';
import { type Evaluate, report, write } from './state.ts';

export const gcra: Evaluate = (state, limit, window, cost, now, apply, out, at) => {
  const divisor = divisorOf(limit, window);
  const token = window / divisor;
  const rate = limit / divisor;
  const capacity = limit * token;
  let debt = state === undefined ? 0 : Math.max(0, (state.a - now) * rate + state.b);
  const need = cost * token;
  if (debt + need <= capacity) {
    if (apply) {
      debt += need;
      state = write(
        state,
        now + Math.floor(debt / rate),
        debt % rate,
        0,
        now + Math.ceil(debt / rate),
      );
    }
    report(out, at, 1, Math.floor((capacity - debt) / token), Math.ceil(debt / rate), 0);
    return state;
  }
  const retry = need <= capacity ? Math.ceil((debt + need - capacity) / rate) : -1;
  report(out, at, 0, Math.floor((capacity - debt) / token), Math.ceil(debt / rate), retry);
  return state;
};
