// GCRA, the twin of lua/gcra.lua: one theoretical arrival time, kept as whole ms plus a fraction.
import { type Evaluate, report, write } from './state.ts';

export const gcra: Evaluate = (state, limit, window, cost, now, apply, out, at) => {
  const capacity = limit * window;
  let debt = state === undefined ? 0 : Math.max(0, (state.a - now) * limit + state.b);
  const need = cost * window;
  if (debt + need <= capacity) {
    if (apply) {
      debt += need;
      state = write(
        state,
        now + Math.floor(debt / limit),
        debt % limit,
        0,
        now + Math.ceil(debt / limit),
      );
    }
    report(out, at, 1, Math.floor((capacity - debt) / window), Math.ceil(debt / limit), 0);
    return state;
  }
  const retry = need <= capacity ? Math.ceil((debt + need - capacity) / limit) : -1;
  report(out, at, 0, Math.floor((capacity - debt) / window), Math.ceil(debt / limit), retry);
  return state;
};
