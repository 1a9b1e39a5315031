// The Lua scripts' reply, decoded in one place: the flat integers of lua/evaluate.lua, by name.
// Its layout, the trailing Redis clock taken off: the overall `allowed` (1 or 0), then per
// policy FIELDS_PER_POLICY fields, `allowed, remaining, reset_ms, retry_ms`, with a retry of -1
// for never. Integers only, so it reads the same over RESP2 and RESP3.
import { FIELDS_PER_POLICY } from './scripts.generated.ts';
import type { PolicyOutcome, StoreReply } from './types.ts';

/** The first element of a call that reached Redis after its expiry and did nothing. */
const EXPIRED = -1;
/** The retry of a cost that exceeds the limit. */
const NEVER = -1;

/** A retry as the scripts and their twins write it, -1 for never, as a decision has it. */
export function retryAfterOf(retry: number): number {
  return retry === NEVER ? Number.POSITIVE_INFINITY : retry;
}

/** Whether Redis ran the call too late, and so did nothing. */
export function isExpired(reply: readonly number[]): boolean {
  return reply[0] === EXPIRED;
}

/** Names the fields of a script's reply; `at` is the Unix ms the script decided at. */
export function decodeReply(reply: readonly number[], at?: number): StoreReply {
  const count = (reply.length - 1) / FIELDS_PER_POLICY;
  const policies: PolicyOutcome[] = new Array(count);
  for (let i = 0; i < count; i++) {
    const at = 1 + FIELDS_PER_POLICY * i;
    policies[i] = {
      allowed: reply[at] === 1,
      remaining: reply[at + 1] as number,
      resetMs: reply[at + 2] as number,
      retryAfterMs: retryAfterOf(reply[at + 3] as number),
    };
  }
  return { allowed: reply[0] === 1, policies, at };
}
