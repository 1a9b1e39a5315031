// Fixed window, the twin of lua/fixed-window.lua: a counter per epoch-aligned window.
import { EPOCH_MS } from '../shared/lua-constants.generated.ts';
import { type Adjust, admitted, type Evaluate, type KeyState, rejected } from './evaluation.ts';

/** Stored as "<window_index> <count>". */
export interface FixedWindowState extends KeyState {
  /** The window's index since the Unix epoch. */
  index: number;
  used: number;
}

export const fixedWindow: Evaluate<FixedWindowState> = (
  { limit, windowMs, cost, now, apply },
  slot,
) => {
  const absolute = now + EPOCH_MS;
  const state = slot.state;
  let index = Math.floor(absolute / windowMs);
  let used = 0;
  if (state !== undefined && state.index >= index) {
    index = state.index;
    used = state.used;
  }
  const endsIn = (index + 1) * windowMs - absolute;
  if (used + cost <= limit) {
    if (apply) {
      used += cost;
      const expiresAt = now + endsIn;
      const into = state ?? slot.spare;
      if (into === undefined) {
        slot.state = { index, used, expiresAt };
      } else {
        into.index = index;
        into.used = used;
        into.expiresAt = expiresAt;
        slot.state = into;
      }
    }
    return used === 0 ? admitted(limit, 0) : admitted(limit - used, endsIn);
  }
  return rejected(Math.max(0, limit - used), endsIn, cost <= limit ? endsIn : -1);
};

/** The twin of ADJUSTMENTS['fixed-window']: a refund only into the window charged, while current. */
export const fixedWindowAdjust: Adjust<FixedWindowState> = (
  { windowMs, now },
  slot,
  amount,
  at,
) => {
  const absolute = now + EPOCH_MS;
  const state = slot.state;
  let index = Math.floor(absolute / windowMs);
  let used = 0;
  if (state !== undefined && state.index >= index) {
    index = state.index;
    used = state.used;
  }
  if (at !== undefined && Math.floor((at + EPOCH_MS) / windowMs) !== index) return;
  used = Math.max(0, used + amount);
  slot.state =
    used === 0 ? undefined : { index, used, expiresAt: now + (index + 1) * windowMs - absolute };
};
