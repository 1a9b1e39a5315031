// The fixed-point units of the rate algorithms (token bucket, GCRA), the twin of `scale` in lua/prelude.lua.

function gcd(a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}

/**
 * The common divisor taken out of a policy's units. A token is `window / divisor` units and each
 * millisecond adds `limit / divisor`, so a full bucket is `limit * window / divisor` units and
 * every refill stays an exact integer. Policies whose plain product is a safe integer keep a
 * divisor of 1, and so the stored state of earlier versions; larger ones divide out
 * gcd(limit, window), which leaves lcm(limit, window) as the full bucket: 10^9 per 365 days is
 * 3.9 × 10^12.
 */
export function divisorOf(limit: number, window: number): number {
  return limit * window > Number.MAX_SAFE_INTEGER ? gcd(limit, window) : 1;
}
