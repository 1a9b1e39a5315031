// Exact integer arithmetic for the algorithms: rate units that fit in 2^53, and a multiply-divide.

function gcd(a: number, b: number): number {
  while (b !== 0) {
    const rest = a % b;
    a = b;
    b = rest;
  }
  return a;
}

/** The fixed-point units of a rate policy: a token is `token` units, each step of `stepMs` adds `rate`. */
export interface Units {
  token: number;
  rate: number;
  stepMs: number;
}

/** Time steps tried in turn, finest first; a step must divide the window into 1000 or more. */
const STEPS = [1, 10, 100, 1_000, 60_000];
const MIN_STEPS_PER_WINDOW = 1_000;

/**
 * The units of a token bucket or GCRA, written into `units` (reused: no allocation per call), or
 * false when none keeps a full bucket, `limit × token` units, an exact integer. Policies whose
 * plain product is a safe integer keep a token of `window` units and a rate of `limit` per ms,
 * the stored state of earlier versions. Larger ones divide out gcd(limit, window), which leaves
 * lcm(limit, window) as a full bucket (10^9 per 365 days: 3.9 × 10^12), and if that is still too
 * large count time in coarser steps that divide the window: refills then land at step
 * boundaries, at most one step (a thousandth of the window) early or late.
 * The twin of `scale` in lua/prelude/fixed-point.lua.
 */
export function scale(limit: number, window: number, units: Units): boolean {
  if (limit * window <= Number.MAX_SAFE_INTEGER) {
    units.token = window;
    units.rate = limit;
    units.stepMs = 1;
    return true;
  }
  for (const step of STEPS) {
    const steps = window / step;
    if (!Number.isInteger(steps) || steps < MIN_STEPS_PER_WINDOW) continue;
    const divisor = gcd(limit, steps);
    if ((limit / divisor) * steps <= Number.MAX_SAFE_INTEGER) {
      units.token = steps / divisor;
      units.rate = limit / divisor;
      units.stepMs = step;
      return true;
    }
  }
  return false;
}

/** Milliseconds from `now` until `steps` more steps after step `t` have passed; 0 for none. */
export function msAfter(steps: number, t: number, stepMs: number, now: number): number {
  return steps <= 0 ? 0 : (t + steps) * stepMs - now;
}

/** Operands of `mulDiv` stay below this, so that its every step is an exact integer. */
export const MUL_DIV_BOUND = 2 ** 44;

/**
 * floor(a × b / c) exactly, for a and c below 2^44 and any safe b, without forming a × b: long
 * multiplication over b's base-256 digits, carrying the remainder, keeps every step below 2^53.
 * The twin of `mul_div` in lua/prelude/fixed-point.lua.
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
