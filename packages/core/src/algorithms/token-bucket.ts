// Token bucket, the twin of lua/token-bucket.lua: fixed-point level plus the step it was taken at.
import { type Adjust, admitted, type Evaluate, type KeyState, rejected } from './evaluation.ts';
import { msAfter, scale, type Units } from './fixed-point.ts';

/** Stored as "<level> <updated_at>". */
export interface TokenBucketState extends KeyState {
  /** Fixed point: a token is `token` units (see fixed-point.ts). */
  level: number;
  /** In time steps: ms for most policies. */
  updatedAt: number;
}

const units: Units = { token: 0, rate: 0, stepMs: 1 };

export const tokenBucket: Evaluate<TokenBucketState> = (
  { limit, windowMs, cost, now, apply },
  slot,
) => {
  scale(limit, windowMs, units);
  const { token, rate, stepMs } = units;
  const t = Math.floor(now / stepMs);
  const capacity = limit * token;
  const state = slot.state;
  let level = capacity;
  let updated = t;
  if (state !== undefined) {
    if (state.updatedAt > t) updated = state.updatedAt;
    level = Math.min(capacity, state.level + (updated - state.updatedAt) * rate);
  }
  const need = cost * token;
  const admits = level >= need;
  if (admits && apply) level -= need;
  // Until the bucket is full again: the reply's reset, and the key's expiry.
  const full = msAfter(Math.ceil((capacity - level) / rate), t, stepMs, now);
  if (!admits) {
    const retry = need <= capacity ? msAfter(Math.ceil((need - level) / rate), t, stepMs, now) : -1;
    // The level is below zero only after a penalty took more than was left.
    return rejected(Math.max(0, Math.floor(level / token)), full, retry);
  }
  if (apply) {
    const into = state ?? slot.spare;
    if (into === undefined) {
      slot.state = { level, updatedAt: updated, expiresAt: now + full };
    } else {
      into.level = level;
      into.updatedAt = updated;
      into.expiresAt = now + full;
      slot.state = into;
    }
  }
  return admitted(Math.floor(level / token), full);
};

/** The twin of ADJUSTMENTS['token-bucket']: into debt for a penalty, up to full for a refund. */
export const tokenBucketAdjust: Adjust<TokenBucketState> = (
  { limit, windowMs, now },
  slot,
  amount,
) => {
  scale(limit, windowMs, units);
  const { token, rate, stepMs } = units;
  const t = Math.floor(now / stepMs);
  const capacity = limit * token;
  const state = slot.state;
  let level = capacity;
  let updated = t;
  if (state !== undefined) {
    if (state.updatedAt > t) updated = state.updatedAt;
    level = Math.min(capacity, state.level + (updated - state.updatedAt) * rate);
  }
  level = Math.min(capacity, level - amount * token);
  const full = msAfter(Math.ceil((capacity - level) / rate), t, stepMs, now);
  slot.state = full <= 0 ? undefined : { level, updatedAt: updated, expiresAt: now + full };
};
