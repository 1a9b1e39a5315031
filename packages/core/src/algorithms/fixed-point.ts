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

/** Operands of `mulDiv` stay below this, so that its every step is an exact integer. */
export const MUL_DIV_BOUND = 2 ** 44;

/**
 * floor(a × b / c) exactly, for a and c below 2^44 and any safe b, without forming a × b: long
 * multiplication over b's base-256 digits, carrying the remainder, keeps every step below 2^53.
 * The twin of `mul_div` in lua/prelude.lua.
 */
export function mulDiv(a: number, b: number, c: number): number {
  let place = 1;
  while (place * 256 <= b) place *= 256;
  let quotient = 0;
  let remainder = 0;
  for (; place >= 1; place /= 256) {
    const step = remainder * 256 + a * (Math.floor(b / place) % 256);
    const digit = Math.floor(step / c);
    quotient = quotient * 256 + digit;
    remainder = step - digit * c;
  }
  return quotient;
}
