// The in-memory form of one key, shared by the TypeScript twins of lua/*.lua.

/**
 * Mirrors a Redis key: `a`, `b` and `c` hold the integers the Lua scripts store in their string
 * value, `log` holds the sliding-window-log's sorted set as sorted times.
 */
export interface State {
  a: number;
  b: number;
  c: number;
  log: number[] | undefined;
  /** Script time (ms since EPOCH_MS) at which the key expires, as PX would set it. */
  expiresAt: number;
}

/**
 * One algorithm's evaluation of one policy, the twin of its Lua function. It writes
 * `[allowed, remaining, resetMs, retryMs]` to `out` at `at`, and returns the state to keep:
 * the one it was given (possibly changed), a new one, or undefined for none.
 */
export type Evaluate = (
  state: State | undefined,
  limit: number,
  window: number,
  cost: number,
  now: number,
  apply: boolean,
  out: number[],
  at: number,
) => State | undefined;

/** Stores integers into a state, creating it if needed; the twin of `SET key value PX ttl`. */
export function write(
  state: State | undefined,
  a: number,
  b: number,
  c: number,
  expiresAt: number,
): State {
  if (state === undefined) return { a, b, c, log: undefined, expiresAt };
  state.a = a;
  state.b = b;
  state.c = c;
  state.expiresAt = expiresAt;
  return state;
}

export function report(
  out: number[],
  at: number,
  allowed: number,
  remaining: number,
  reset: number,
  retry: number,
): void {
  out[at] = allowed;
  out[at + 1] = remaining;
  out[at + 2] = reset;
  out[at + 3] = retry;
}
