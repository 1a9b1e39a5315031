// @nestjs/throttler's storage, the twin of lua/throttler.lua: one `increment` of a key's record and
// its throttlers' hits, for the memory storage.
import type { KeyState } from './evaluation.ts';

/** One increment, as the guard asks for it, in the scripts' units: times are ms since EPOCH_MS. */
export interface ThrottlerInput {
  /** How long each hit counts, and the window's length: whole ms. */
  readonly ttl: number;
  readonly limit: number;
  /** Whole ms; 0 for no block. */
  readonly blockDuration: number;
  readonly now: number;
}

/** What the guard reads back: @nestjs/throttler's ThrottlerStorageRecord. */
export interface ThrottlerRecord {
  /** The hits that count now, the refused one included when refused without a block. */
  totalHits: number;
  /** Whole seconds, rounded up, until the key's window ends. */
  timeToExpire: number;
  isBlocked: boolean;
  /** Whole seconds, rounded up, until a hit may count again; 0 when not blocked. */
  timeToBlockExpire: number;
}

/** A key's record and its throttlers' hits, as the script's hash and sorted sets hold them. */
export interface ThrottlerState extends KeyState {
  /** The window's end. */
  ends: number;
  blocked: boolean;
  blockEnds: number;
  /** Each throttler's hits: when each stops counting, in ascending order. */
  readonly hits: Map<string, number[]>;
}

/**
 * Whole seconds from `now` until `at`, rounded up, as ThrottlerStorageService counts them; -0 as
 * 0, as Redis answers it.
 */
function secondsUntil(at: number, now: number): number {
  return Math.ceil((at - now) / 1000) || 0;
}

/** Counts a hit that stops counting at `until`, in order among the others. */
function countHit(hits: number[], until: number): void {
  let at = hits.length;
  while (at > 0 && (hits[at - 1] as number) > until) at--;
  hits.splice(at, 0, until);
}

/**
 * One increment of `name`'s hits under a key whose state is `state` (undefined for a key that
 * holds nothing), exactly as lua/throttler.lua makes it: returns the state to keep, its
 * `expiresAt` the latest time anything in it counts (the script's `keep`), and the record.
 */
export function throttlerIncrement(
  state: ThrottlerState | undefined,
  name: string,
  { ttl, limit, blockDuration, now }: ThrottlerInput,
): { state: ThrottlerState; record: ThrottlerRecord } {
  const kept = state ?? {
    ends: now + ttl,
    blocked: false,
    blockEnds: 0,
    expiresAt: now,
    hits: new Map<string, number[]>(),
  };
  let keep = kept.expiresAt;
  let hits = (kept.hits.get(name) ?? []).filter((until) => until > now);
  kept.hits.set(name, hits);
  const hit = (): void => {
    countHit(hits, now + ttl);
    keep = Math.max(keep, now + ttl);
  };
  let timeToExpire = secondsUntil(kept.ends, now);
  if (timeToExpire <= 0) {
    kept.ends = now + ttl;
    timeToExpire = secondsUntil(kept.ends, now);
  }
  let record: ThrottlerRecord;
  if (blockDuration <= 0) {
    // Refused while `limit` hits count, until the oldest of them stops counting.
    const refused = hits.length >= limit;
    if (refused) {
      const oldest = hits[0];
      record = {
        totalHits: hits.length + 1,
        timeToExpire,
        isBlocked: true,
        timeToBlockExpire: oldest === undefined ? timeToExpire : secondsUntil(oldest, now),
      };
    } else {
      hit();
      record = { totalHits: hits.length, timeToExpire, isBlocked: false, timeToBlockExpire: 0 };
    }
  } else {
    if (!kept.blocked) hit();
    if (hits.length > limit && !kept.blocked) {
      kept.blocked = true;
      kept.blockEnds = now + blockDuration;
    }
    let timeToBlockExpire = secondsUntil(kept.blockEnds, now);
    if (kept.blocked && timeToBlockExpire <= 0) {
      // The block is over: this hit starts the throttler's count afresh.
      kept.blocked = false;
      hits = [];
      kept.hits.set(name, hits);
      hit();
    }
    if (!kept.blocked) timeToBlockExpire = 0;
    record = { totalHits: hits.length, timeToExpire, isBlocked: kept.blocked, timeToBlockExpire };
  }
  if (kept.blocked) keep = Math.max(keep, kept.blockEnds);
  kept.expiresAt = Math.max(keep, kept.ends);
  return { state: kept, record };
}
