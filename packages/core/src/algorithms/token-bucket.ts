// Token bucket, the twin of lua/token-bucket.lua: fixed-point level plus the time it was taken.
import { admitted, type Evaluate, type KeyState, rejected } from './evaluation.ts';
import { divisorOf } from './fixed-point.ts';

/** Stored as "<level> <updated_at>". */
export interface TokenBucketState extends KeyState {
  /** Fixed point: a token is `token` units (see fixed-point.ts). */
  level: number;
  updatedAt: number;
}

export const tokenBucket: Evaluate<TokenBucketState> = (
  { limit, windowMs, cost, now, apply },
  slot,
) => {
  const divisor = divisorOf(limit, windowMs);
  const token = windowMs / divisor;
  const rate = limit / divisor;
  const capacity = limit * token;
  const state = slot.state;
  let level = capacity;
  let updated = now;
  if (state !== undefined) {
    if (state.updatedAt > now) updated = state.updatedAt;
    level = Math.min(capacity, state.level + (updated - state.updatedAt) * rate);
  }
  const need = cost * token;
  if (level >= need) {
    if (apply) {
      level -= need;
      const expiresAt = now + Math.ceil((capacity - level) / rate);
      if (state === undefined) {
        slot.state = { level, updatedAt: updated, expiresAt };
      } else {
        state.level = level;
        state.updatedAt = updated;
        state.expiresAt = expiresAt;
      }
    }
    return admitted(Math.floor(level / token), Math.ceil((capacity - level) / rate));
  }
  const retry = need <= capacity ? Math.ceil((need - level) / rate) : -1;
  return rejected(Math.floor(level / token), Math.ceil((capacity - level) / rate), retry);
};
