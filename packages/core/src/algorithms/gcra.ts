// GCRA, the twin of lua/gcra.lua: one theoretical arrival time, kept as whole steps plus a fraction.
import { type Adjust, admitted, type Evaluate, type KeyState, rejected } from './evaluation.ts';
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
  // A fraction written under a higher limit (a larger rate) is at most one step here.
  let debt =
    state === undefined
      ? 0
      : Math.max(0, (state.tat - t) * rate + Math.min(state.fraction, rate - 1));
  const need = cost * token;
  const admits = debt + need <= capacity;
  if (admits && apply) debt += need;
  // Until the TAT is now: the reply's reset, and the key's expiry.
  const due = msAfter(Math.ceil(debt / rate), t, stepMs, now);
  if (!admits) {
    const retry =
      need <= capacity ? msAfter(Math.ceil((debt + need - capacity) / rate), t, stepMs, now) : -1;
    return rejected(Math.max(0, Math.floor((capacity - debt) / token)), due, retry);
  }
  if (apply) {
    const tat = t + Math.floor(debt / rate);
    const fraction = debt % rate;
    const into = state ?? slot.spare;
    if (into === undefined) {
      slot.state = { tat, fraction, expiresAt: now + due };
    } else {
      into.tat = tat;
      into.fraction = fraction;
      into.expiresAt = now + due;
      slot.state = into;
    }
  }
  return admitted(Math.max(0, Math.floor((capacity - debt) / token)), due);
};

/** The twin of ADJUSTMENTS['gcra']: the TAT later for a penalty, earlier but not past now for a refund. */
export const gcraAdjust: Adjust<GcraState> = ({ limit, windowMs, now }, slot, amount) => {
  scale(limit, windowMs, units);
  const { token, rate, stepMs } = units;
  const t = Math.floor(now / stepMs);
  const state = slot.state;
  let debt =
    state === undefined
      ? 0
      : Math.max(0, (state.tat - t) * rate + Math.min(state.fraction, rate - 1));
  debt = Math.max(0, debt + amount * token);
  slot.state =
    debt === 0
      ? undefined
      : {
          tat: t + Math.floor(debt / rate),
          fraction: debt % rate,
          expiresAt: now + msAfter(Math.ceil(debt / rate), t, stepMs, now),
        };
};
