// After a decision: what an admitted consume took given back (`refund`), or more taken
// (`penalize`); the concurrency slots it holds given back (`release`) or kept longer (`renew`).
import type { Observers } from '../observe/observer.ts';
import type { SentinelError } from '../shared/errors.ts';
import { storageIdentity } from '../shared/fingerprint.ts';
import type { ConsumeOptions, Decision, Lease, StoreReply } from '../shared/types.ts';
import { checkObject, checkPositiveInteger, fail } from '../shared/validation.ts';
import { IdentityRequest, JointLayout } from '../stores/store-keys.ts';
import { type BlockCache, blockId } from './block-cache.ts';
import { LimiterDecision, toDecision } from './decision.ts';
import { unknownTierError } from './failure-mode.ts';
import { checkKey, type Plans } from './plans.ts';
import { QuotaCharge } from './quota-leases.ts';
import type { StoreCalls } from './store-calls.ts';

export interface RefundOptions {
  /** The decision `consume` resolved with for this key. */
  decision: Decision;
  /** Units to give back: a positive integer. @default what the decision took and has not had back */
  cost?: number;
}

/** What refunds and penalties need of the limiter. */
export interface AdjustmentParts {
  readonly plans: Plans;
  readonly calls: StoreCalls;
  readonly blocks: BlockCache | undefined;
  readonly clock: (() => number) | undefined;
  readonly report: (error: SentinelError) => void;
  readonly observers: Observers | undefined;
}

/** See `Limiter.refund`. */
export async function refund(
  parts: AdjustmentParts,
  key: string,
  options: RefundOptions,
): Promise<boolean> {
  checkKey(key);
  checkObject(options, 'options', '{ decision, cost? }');
  const { decision, cost } = options;
  checkObject(decision, 'decision', 'the decision consume resolved with');
  if (cost !== undefined) checkPositiveInteger(cost, 'cost');
  const kept = LimiterDecision.chargeOf(decision);
  // Spent from a quota lease: given back to it while it lasts, with no store call.
  if (kept instanceof QuotaCharge) {
    if (storageIdentity(key) !== kept.identity) {
      fail('key', 'is not the key the decision was made for');
    }
    return kept.refund(cost);
  }
  const charge = kept as IdentityRequest | undefined;
  // A decision that consumed nothing, or whose store cannot say when it charged, has nothing to give.
  if (charge === undefined || charge.left === 0 || charge.chargedAt === undefined) return false;
  const { identity, layout } = charge;
  const id = storageIdentity(key);
  // A joint consume's decision may be given back under any of its keys.
  if (layout instanceof JointLayout ? !layout.identities.includes(id) : id !== identity) {
    fail('key', 'is not the key the decision was made for');
  }
  const amount = Math.min(cost ?? charge.left, charge.left);
  // Taken off first, so that a second refund racing this one gives back no more than is left.
  charge.left -= amount;
  const request = new IdentityRequest(identity, layout, amount, false, parts.clock?.());
  request.adjust = { kind: 'refund', at: charge.chargedAt };
  // Should the store give up on it and Redis run it all the same, the late reply says so.
  request.refundOf = charge;
  try {
    await parts.calls.adjust(request);
  } catch (error) {
    // The store did nothing, as far as anyone knows: the units may be given back later. Redis does
    // nothing with a call that reaches it late, but one it ran just before its deadline may be
    // answered late: `lateReply` then takes them off again.
    charge.left += amount;
    throw error;
  }
  // A refusal this process remembers may be out of date now.
  parts.blocks?.forget(blockId(layout.plan, key));
  return true;
}

/** The admitted consume behind `decision` whose slots are still held, if any. */
function holderOf(decision: Decision): IdentityRequest | undefined {
  checkObject(decision, 'decision', 'the decision consume resolved with');
  const charge = LimiterDecision.chargeOf(decision) as IdentityRequest | undefined;
  if (charge === undefined || !charge.holds || charge.chargedAt === undefined) return undefined;
  return charge;
}

/** Whether a release or renewal found every slot of the plan's concurrency policies held. */
function slotsHeld(layout: IdentityRequest['layout'], reply: StoreReply): boolean {
  return layout.plan.policies.every(
    (policy, i) => policy.algorithm !== 'concurrency' || reply.policies[i]?.allowed === true,
  );
}

/**
 * Runs a charge's releases and renewals one after another: a renewal moves its slots to the time
 * it ran, which the next must read, so one sent while another is on its way would look where the
 * slots no longer are, and leave them held for a whole lease.
 */
function inTurn<T>(charge: IdentityRequest, step: () => Promise<T>): Promise<T> {
  const run = charge.leaseTurn.then(step, step);
  charge.leaseTurn = run.then(
    () => undefined,
    () => undefined,
  );
  return run;
}

/** See `Limiter.release`. */
export function release(parts: AdjustmentParts, decision: Decision): Promise<boolean> {
  const charge = holderOf(decision);
  if (charge === undefined) return Promise.resolve(false);
  return inTurn(charge, async () => {
    // A release before this one in turn gave them back, or a renewal found them gone.
    if (!charge.holds) return false;
    charge.holds = false;
    const { identity, layout, cost } = charge;
    const request = new IdentityRequest(identity, layout, cost, false, parts.clock?.());
    request.adjust = { kind: 'release', at: charge.chargedAt as number };
    const lease = decision.lease as Lease;
    // Observers hear of it however it ends: the slots are this process's no longer.
    const released = (lapsed: boolean) =>
      parts.observers?.release?.({
        identity,
        tier: layout.plan.tier,
        policies: lease.policies,
        slots: cost,
        lapsed,
      });
    // Not given again on failure: a release Redis ran just before the store gave up on it
    // cannot be told from one it never ran, and the slots lapse with their lease either way.
    let reply: StoreReply;
    try {
      reply = await parts.calls.adjust(request);
    } catch (error) {
      released(false);
      throw error;
    }
    const held = slotsHeld(layout, reply);
    released(!held);
    return held;
  });
}

/** See `Limiter.renew`. */
export function renew(parts: AdjustmentParts, decision: Decision): Promise<boolean> {
  const charge = holderOf(decision);
  if (charge === undefined) return Promise.resolve(false);
  return inTurn(charge, async () => {
    if (!charge.holds) return false;
    const { identity, layout, cost } = charge;
    const request = new IdentityRequest(identity, layout, cost, false, parts.clock?.());
    request.adjust = { kind: 'renew', at: charge.chargedAt as number };
    const reply = await parts.calls.adjust(request);
    // The slots now count from the renewal, which is when a release must find them.
    if (!slotsHeld(layout, reply) || reply.at === undefined) {
      charge.holds = false;
      return false;
    }
    charge.chargedAt = reply.at;
    return true;
  });
}

/** See `Limiter.penalize`. */
export async function penalize(
  parts: AdjustmentParts,
  key: string,
  options: ConsumeOptions | undefined,
): Promise<Decision> {
  checkKey(key);
  const cost = options?.cost ?? 1;
  checkPositiveInteger(cost, 'cost');
  const tier = options?.tier;
  const compiled = parts.plans.of(tier, options?.policies);
  if (compiled === undefined) {
    const error = unknownTierError(tier);
    parts.report(error);
    throw error;
  }
  const { plan, layout } = compiled;
  const request = new IdentityRequest(storageIdentity(key), layout, cost, false, parts.clock?.());
  request.adjust = { kind: 'penalize' };
  return toDecision(plan, await parts.calls.adjust(request));
}
