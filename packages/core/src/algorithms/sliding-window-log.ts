// Sliding window log, the twin of lua/sliding-window-log.lua: the admitted times, sorted.
import { type Evaluate, report, type State } from './state.ts';

export const slidingWindowLog: Evaluate = (state, limit, window, cost, now, apply, out, at) => {
  const log = state?.log;
  if (log !== undefined) {
    // ZREMRANGEBYSCORE -inf (now - window)
    let expired = 0;
    while (expired < log.length && (log[expired] as number) <= now - window) expired++;
    if (expired > 0) log.splice(0, expired);
  }
  const used = log?.length ?? 0;
  if (used + cost <= limit) {
    if (apply) {
      const entries = log ?? [];
      // ZADD keeps the set sorted; times only go backwards if the clock does.
      let position = entries.length;
      while (position > 0 && (entries[position - 1] as number) > now) position--;
      const later = entries.splice(position);
      for (let i = 0; i < cost; i++) entries.push(now);
      for (const time of later) entries.push(time);
      const kept: State = state ?? { a: 0, b: 0, c: 0, log: entries, expiresAt: 0 };
      kept.log = entries;
      // The newest entry is later than now only if the clock stepped back.
      const reset = (entries[entries.length - 1] as number) + window - now;
      kept.expiresAt = now + reset;
      report(out, at, 1, Math.max(0, limit - used - cost), reset, 0);
      return kept;
    }
    if (used === 0) {
      report(out, at, 1, limit, 0, 0);
      return undefined;
    }
  }
  const reset = used > 0 ? (log?.[used - 1] as number) + window - now : 0;
  const remaining = Math.max(0, limit - used);
  if (used + cost <= limit) report(out, at, 1, remaining, reset, 0);
  else if (cost > limit) report(out, at, 0, remaining, reset, -1);
  else
    report(out, at, 0, remaining, reset, (log?.[used + cost - limit - 1] as number) + window - now);
  // An emptied set is a deleted key in Redis.
  return used === 0 ? undefined : state;
};
