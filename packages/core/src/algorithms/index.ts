// The TypeScript twins of lua/*.lua, by algorithm name, for the memory store.
import type { Algorithm } from '../types.ts';
import type { Evaluate, KeyState } from './evaluation.ts';
import { fixedWindow } from './fixed-window.ts';
import { gcra } from './gcra.ts';
import { slidingWindowCounter } from './sliding-window-counter.ts';
import { slidingWindowLog } from './sliding-window-log.ts';
import { tokenBucket } from './token-bucket.ts';

/**
 * Typed by the generated list of algorithms: one missing here fails to compile. A key holds one
 * algorithm's state only, since its name ends with the algorithm.
 */
export const evaluators = {
  'token-bucket': tokenBucket,
  gcra,
  'fixed-window': fixedWindow,
  'sliding-window-counter': slidingWindowCounter,
  'sliding-window-log': slidingWindowLog,
} as Record<Algorithm, Evaluate<KeyState>>;

export type { Evaluate, KeyState, PolicyInput, Slot } from './evaluation.ts';
