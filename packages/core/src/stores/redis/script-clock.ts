// For this repository's own tests of the scripts: a RedisStore made to run them on a given clock,
// so that a test steps time instead of waiting for it. The package does not export this module:
// a user's RedisStore always decides on Redis's TIME, and no process's clock can stand in for it.

/** The clocks tests gave, by RedisStore (typed loosely here: redis-store.ts imports this). */
const clocks = new WeakMap<object, () => number>();

/** Makes `store`, a RedisStore, run its scripts on `clock` (Unix ms) instead of Redis's TIME. */
export function runScriptsOn<S extends object>(store: S, clock: () => number): S {
  clocks.set(store, clock);
  return store;
}

/** The clock a test gave `store`; undefined for every store a user builds. */
export function scriptClockOf(store: object): (() => number) | undefined {
  return clocks.get(store);
}
