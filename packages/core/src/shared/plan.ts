// A plan: what one consume runs for a tier, built by limiter/policy.ts and read by the stores.
import type { Lease, PolicyKind, ResolvedPolicy } from './types.ts';

/** Everything one consume needs for a tier, computed once. */
export interface Plan {
  readonly tier: string | undefined;
  readonly policies: readonly ResolvedPolicy[];
  /**
   * Appended to the identity's key prefix, one per policy, then `<suffix>:box` for each policy
   * with a penalty box: `:<name>:<algorithm>`, and for a
   * policy named by the caller `:<name>:<window>:<algorithm>` (see `keySuffix`).
   */
  readonly keySuffixes: readonly string[];
  readonly script: 'mixed' | PolicyKind;
  readonly args: readonly string[];
  /** What an admitted consume holds, when the plan has concurrency policies. */
  readonly lease: Lease | undefined;
}
