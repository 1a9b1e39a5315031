// The Lua scripts' reply, decoded in one place, by name. Its layout, the trailing Redis clock
// taken off: per policy `remaining, reset_ms` for one that admits, and `-1 - remaining,
// reset_ms, retry_ms` for one that refuses, with a retry of -1 for never (see `answer` in
// lua/prelude/reply.lua); a request admits when every policy does. A batch's reply is its
// requests' answers one after the other. Integers only, so it reads the same over RESP2 and RESP3.
import { retryAfterOf } from '../../algorithms/evaluation.ts';
import type { PolicyOutcome, StoreReply } from '../../shared/types.ts';

/** Whether Redis ran the call too late, and so did nothing: it then answers with its clock alone. */
export function isExpired(reply: readonly number[]): boolean {
  return reply.length === 0;
}

/** How many of a reply's integers, from `start`, answer one request of `count` policies. */
export function answerLength(reply: readonly number[], start: number, count: number): number {
  let at = start;
  for (let i = 0; i < count; i++) at += (reply[at] as number) < 0 ? 3 : 2;
  return at - start;
}

/**
 * Names the fields of one request's answer, from `start`, for its `count` policies; `at` is the
 * Unix ms the script decided at.
 */
export function decodeReply(
  reply: readonly number[],
  count: number,
  at?: number,
  start = 0,
): StoreReply {
  const policies: PolicyOutcome[] = new Array(count);
  let allowed = true;
  let field = start;
  for (let i = 0; i < count; i++) {
    const first = reply[field] as number;
    if (!Number.isSafeInteger(first)) throw new TypeError(`Unexpected script reply ${reply}`);
    if (first >= 0) {
      policies[i] = {
        allowed: true,
        remaining: first,
        resetMs: reply[field + 1] as number,
        retryAfterMs: 0,
      };
      field += 2;
    } else {
      allowed = false;
      policies[i] = {
        allowed: false,
        remaining: -1 - first,
        resetMs: reply[field + 1] as number,
        retryAfterMs: retryAfterOf(reply[field + 2] as number),
      };
      field += 3;
    }
  }
  return { allowed, policies, at };
}

/** A reply that took a quota lease: its last two integers are the units leased and its ms. */
export function withLease(decoded: StoreReply, reply: readonly number[]): StoreReply {
  const units = reply[reply.length - 2] as number;
  const ms = reply[reply.length - 1] as number;
  if (!Number.isSafeInteger(units) || !Number.isSafeInteger(ms)) {
    throw new TypeError(`Unexpected script reply ${reply}`);
  }
  return { ...decoded, leased: { units, ms } };
}
