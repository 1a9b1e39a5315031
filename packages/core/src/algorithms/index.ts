// The TypeScript twins of lua/*.lua, by algorithm name, for the memory store.
import type { Algorithm } from '../types.ts';
import { fixedWindow } from './fixed-window.ts';
import { gcra } from './gcra.ts';
import { slidingWindowCounter } from './sliding-window-counter.ts';
import { slidingWindowLog } from './sliding-window-log.ts';
import type { Evaluate } from './state.ts';
import { tokenBucket } from './token-bucket.ts';

// Typed by the generated list of algorithms: one missing here fails to compile.
export const evaluators: Record<Algorithm, Evaluate> = {
  'token-bucket': tokenBucket,
  gcra,
  'fixed-window': fixedWindow,
  'sliding-window-counter': slidingWindowCounter,
  'sliding-window-log': slidingWindowLog,
};

export type { Evaluate, State } from './state.ts';
