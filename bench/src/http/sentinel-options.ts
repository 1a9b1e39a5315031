// Sentinel's options in every app: its defaults, the Redis URL, a limit nothing reaches, and a
// count of the failures it reports. A decision taken without Redis (past the deadline, or with
// the breaker open) answers early, which would flatter Sentinel's figures: the suite reports them.
import { HUGE_LIMIT, WINDOW_MS } from './variants.ts';

let failures = 0;

export function sentinelOptions(redisUrl: string) {
  return {
    redisUrl,
    limit: HUGE_LIMIT,
    window: WINDOW_MS,
    onError() {
      failures++;
    },
  };
}

/** The failures Sentinel reported in this process so far. */
export function sentinelFailures(): number {
  return failures;
}
