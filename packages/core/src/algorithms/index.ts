// The TypeScript twins of lua/*.lua, by algorithm name, for the memory store.
import type { PolicyKind } from '../shared/types.ts';
import {
  concurrency,
  concurrencyAdjust,
  concurrencyRelease,
  concurrencyRenew,
  type Renew,
} from './concurrency.ts';
import type { Adjust, Evaluate, KeyState } from './evaluation.ts';
import { fixedWindow, fixedWindowAdjust } from './fixed-window.ts';
import { gcra, gcraAdjust } from './gcra.ts';
import { slidingWindowCounter, slidingWindowCounterAdjust } from './sliding-window-counter.ts';
import { slidingWindowLog, slidingWindowLogAdjust } from './sliding-window-log.ts';
import { tokenBucket, tokenBucketAdjust } from './token-bucket.ts';

/**
 * Checked against the generated list of algorithms (`satisfies`): one missing here, or one the
 * scripts do not have, fails to compile. Each twin then widens to any key's state, which is
 * safe since a key holds one algorithm's state only: its name ends with the algorithm.
 */
export const evaluators = {
  'token-bucket': tokenBucket,
  gcra,
  'fixed-window': fixedWindow,
  'sliding-window-counter': slidingWindowCounter,
  'sliding-window-log': slidingWindowLog,
  concurrency,
} satisfies Record<PolicyKind, unknown> as Record<PolicyKind, Evaluate<KeyState>>;

/** The twins of the scripts' ADJUSTMENTS: penalties and refunds, by algorithm name. */
export const adjusters = {
  'token-bucket': tokenBucketAdjust,
  gcra: gcraAdjust,
  'fixed-window': fixedWindowAdjust,
  'sliding-window-counter': slidingWindowCounterAdjust,
  'sliding-window-log': slidingWindowLogAdjust,
  concurrency: concurrencyAdjust,
} satisfies Record<PolicyKind, unknown> as Record<PolicyKind, Adjust<KeyState>>;

/**
 * The twins of the scripts' LEASES, and of a release: the kinds whose slots a renewal moves and
 * a release gives back, each answering whether the slots were still held.
 */
export const leases: Partial<
  Record<PolicyKind, { renew: Renew<KeyState>; release: Renew<KeyState> }>
> = {
  concurrency: {
    renew: concurrencyRenew as Renew<KeyState>,
    release: concurrencyRelease as Renew<KeyState>,
  },
};

export type { Renew } from './concurrency.ts';
export type { Adjust, Evaluate, KeyState, PolicyInput, Slot } from './evaluation.ts';
