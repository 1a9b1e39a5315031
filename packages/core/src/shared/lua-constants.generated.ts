// Generated from lua/*.lua by packages/core/scripts/generate-lua.mjs. Do not edit.

/** The scripts' epoch: their times are milliseconds since this Unix time. */
export const EPOCH_MS = 1704067200000;

/** A policy's arguments to the scripts: algorithm, limit, window and penalty box. */
export const ARGS_PER_POLICY = 4;

/** The algorithms Sentinel runs, each atomically in one Redis script call and in memory. */
export const ALGORITHMS = [
  'token-bucket',
  'gcra',
  'fixed-window',
  'sliding-window-counter',
  'sliding-window-log',
] as const;

/** Everything the scripts hold a policy with: the rate algorithms, then concurrency. */
export const POLICY_KINDS = [...ALGORITHMS, 'concurrency'] as const;
