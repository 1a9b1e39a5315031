// GCRA, the twin of lua/gcra.lua: one theoretical arrival time, kept as whole ms plus a fraction.
import { admitted, type Evaluate, type KeyState, rejected } from './evaluation.ts';
import { divisorOf } from './fixed-point.ts';

/** Stored as "<tat_ms> <fraction>": the TAT is tatMs + fraction / rate ms. */
export interface GcraState extends KeyState {
  tatMs: number;
  fraction: number;
}

export const gcra: Evaluate<GcraState> = ({ limit, windowMs, cost, now, apply }, slot) => {
  const divisor = divisorOf(limit, windowMs);
  const token = windowMs / divisor;
  const rate = limit / divisor;
  const capacity = limit * token;
  const state = slot.state;
  let debt = state === undefined ? 0 : Math.max(0, (state.tatMs - now) * rate + state.fraction);
  const need = cost * token;
  if (debt + need <= capacity) {
    if (apply) {
      debt += need;
      const tatMs = now + Math.floor(debt / rate);
      const fraction = debt % rate;
      const expiresAt = now + Math.ceil(debt / rate);
      if (state === undefined) {
        slot.state = { tatMs, fraction, expiresAt };
      } else {
        state.tatMs = tatMs;
        state.fraction = fraction;
        state.expiresAt = expiresAt;
      }
    }
    return admitted(Math.floor((capacity - debt) / token), Math.ceil(debt / rate));
  }
  const retry = need <= capacity ? Math.ceil((debt + need - capacity) / rate) : -1;
  return rejected(Math.floor((capacity - debt) / token), Math.ceil(debt / rate), retry);
};
