// GCRA, the twin of lua/gcra.lua: one theoretical arrival time, kept as whole steps plus a fraction.
import { admitted, type Evaluate, type KeyState, rejected } from './evaluation.ts';
import { msAfter, scale, type Units } from './fixed-point.ts';

/** Stored as "<tat> <fraction>": the TAT is tat + fraction / rate time steps (ms for most policies). */
export interface GcraState extends KeyState {
  tat: number;
  fraction: number;
}

const units: Units = { token: 0, rate: 0, stepMs: 1 };

export const gcra: Evaluate<GcraState> = ({ limit, windowMs, cost, now, apply }, slot) => {
  scale(limit, windowMs, units);
  const { token, rate, stepMs } = units;
  const t = Math.floor(now / stepMs);
  const capacity = limit * token;
  const state = slot.state;
  let debt = state === undefined ? 0 : Math.max(0, (state.tat - t) * rate + state.fraction);
  const need = cost * token;
  if (debt + need <= capacity) {
    if (apply) {
      debt += need;
      const tat = t + Math.floor(debt / rate);
      const fraction = debt % rate;
      const expiresAt = now + msAfter(Math.ceil(debt / rate), t, stepMs, now);
      if (state === undefined) {
        slot.state = { tat, fraction, expiresAt };
      } else {
        state.tat = tat;
        state.fraction = fraction;
        state.expiresAt = expiresAt;
      }
    }
    return admitted(
      Math.floor((capacity - debt) / token),
      msAfter(Math.ceil(debt / rate), t, stepMs, now),
    );
  }
  const retry =
    need <= capacity ? msAfter(Math.ceil((debt + need - capacity) / rate), t, stepMs, now) : -1;
  return rejected(
    Math.floor((capacity - debt) / token),
    msAfter(Math.ceil(debt / rate), t, stepMs, now),
    retry,
  );
};
