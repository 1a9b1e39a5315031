// Deletes an identity's state: for the policies given, for one tier, or for every tier.
import type { SentinelError } from '../shared/errors.ts';
import { storageIdentity } from '../shared/fingerprint.ts';
import type { ConsumeOptions, Store } from '../shared/types.ts';
import { type BlockCache, blockId } from './block-cache.ts';
import { type FailureMode, unknownTierError } from './failure-mode.ts';
import type { CompiledPlan } from './plan-cache.ts';
import { checkKey, type Plans } from './plans.ts';

/** What a reset needs of the limiter. */
export interface ResetParts {
  readonly plans: Plans;
  readonly store: Store;
  readonly failureMode: FailureMode;
  readonly blocks: BlockCache | undefined;
  readonly report: (error: SentinelError) => void;
}

/**
 * See `Limiter.reset`. Like consume, a key that is not a string rejects with a TypeError, and an
 * unknown tier is reported to `onError`: it holds no state, so nothing is deleted.
 */
export async function reset(
  parts: ResetParts,
  key: string,
  options: Pick<ConsumeOptions, 'tier' | 'policies'> | undefined,
): Promise<void> {
  checkKey(key);
  const tier = options?.tier;
  const own = options?.policies;
  const chosen =
    own === undefined ? parts.plans.ofTier(tier) : [parts.plans.of(tier, own) as CompiledPlan];
  if (chosen === undefined) {
    parts.report(unknownTierError(tier));
    return;
  }
  for (const { plan } of chosen) parts.blocks?.forget(blockId(plan, key));
  const identity = storageIdentity(key);
  const keys = [...new Set(chosen.flatMap(({ layout }) => layout.keysOf(identity)))];
  await parts.store.reset(keys);
  await parts.failureMode.reset(keys);
}
