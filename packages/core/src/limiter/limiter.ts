// createLimiter: options resolved once, then each decision flows through the same steps: its
// plan, the block cache, the store (or the failure mode), the decision, and its observers.
import { observeDecision } from '../observe/observer.ts';
import type { Telemetry } from '../observe/opentelemetry.ts';
import { storageIdentity } from '../shared/fingerprint.ts';
import type { Plan } from '../shared/plan.ts';
import type { ConsumeOptions, Decision } from '../shared/types.ts';
import { checkPositiveInteger, describe, fail } from '../shared/validation.ts';
import { toRedisConnection } from '../stores/redis/connection.ts';
import { RedisStore } from '../stores/redis/redis-store.ts';
import { IdentityRequest, JointLayout, type KeyLayout } from '../stores/store-keys.ts';
import { blockId } from './block-cache.ts';
import { FailureMode, unknownTierError } from './failure-mode.ts';
import { type LimiterOptions, resolveOptions, resolveStore } from './options.ts';
import type { CompiledPlan } from './plan-cache.ts';
import { checkKey, Plans } from './plans.ts';
import { type Heat, QuotaLeases } from './quota-leases.ts';
import { penalize, type RefundOptions, refund, release, renew } from './refund-and-penalty.ts';
import { reset } from './reset.ts';
import { type BesideDecisions, type Leg, StoreCalls } from './store-calls.ts';

export { LIMITER_OPTION_NAMES, type LimiterOptions } from './options.ts';
export type { RefundOptions } from './refund-and-penalty.ts';

export interface Limiter {
  /**
   * Consumes `cost` (default 1) from every policy of the key's tier, or from none. A key that is
   * not a string, or a cost that is not a positive integer, rejects with a TypeError; an unknown
   * tier is reported to `onError` and answered by `onStoreError`.
   */
  consume(key: string, options?: ConsumeOptions): Promise<Decision>;
  /**
   * Consumes for several identities at once, all-or-nothing, in one store call: the i-th policy
   * of the tier (or of `policies`) counts for `keys[i]`, under the keys that identity's own
   * consume of that policy uses, so that both count against one budget. A refusal by any policy
   * consumes from none. `keys` must hold one key per policy; otherwise, and for a key that is
   * not a string, it rejects with a TypeError. On a Redis Cluster the keys of one call must
   * share a hash slot (see docs/core.md); the block cache does not answer such calls.
   */
  consumeJointly(keys: readonly string[], options?: ConsumeOptions): Promise<Decision>;
  /** The decision consume would make now, without consuming anything. */
  peek(key: string, options?: ConsumeOptions): Promise<Decision>;
  /** The decision consumeJointly would make now, without consuming anything. */
  peekJointly(keys: readonly string[], options?: ConsumeOptions): Promise<Decision>;
  /**
   * Deletes the key's state: for the policies given, for the tier named, or for every tier. A
   * tier the limiter does not know holds no state: it is reported to `onError`, as consume
   * reports it, and nothing is deleted.
   */
  reset(key: string, options?: Pick<ConsumeOptions, 'tier' | 'policies'>): Promise<void>;
  /**
   * Gives back what an admitted consume took, atomically, to exactly the policies it consumed
   * from, and only into the windows it was charged in: `cost` (at most, and by default, what is
   * left of the decision's) goes back, never past a full limit. For requests that should not
   * count after all, such as successful logins. Resolves true once given back; false, with no
   * store call, for a decision that was refused, degraded, a peek's, or already given back.
   * Rejects with a SentinelError when the store fails, and then gave back nothing, unless Redis
   * ran it just before the store gave up on it: its late reply then marks the units given back,
   * so that a later refund of the decision does not give them again.
   */
  refund(key: string, options: RefundOptions): Promise<boolean>;
  /**
   * Takes `cost` more from every policy of the tier (or `policies`), whatever is left, for a
   * failed CAPTCHA, say: the identity then waits longer. Resolves with what a peek would decide
   * afterwards; rejects with a SentinelError when the store fails (though Redis may have taken
   * the penalty just before the store gave up on it: a retry may then take it twice).
   */
  penalize(key: string, options?: ConsumeOptions): Promise<Decision>;
  /**
   * Gives back the concurrency slots an admitted decision holds (see `Decision.lease`), in one
   * store call. Resolves true once given back; false when its lease had ended already, so that
   * the slots were free (observers hear of it), and false with no store call for a decision
   * that holds none: refused, degraded, a peek's, released already, or with no concurrency
   * policy. Rejects
   * with a SentinelError when the store fails; the slots then lapse when the lease ends. Not
   * retried: a release Redis ran just before the store gave up on it looks the same as one it
   * never ran, and a second would free another request's slot.
   */
  release(decision: Decision): Promise<boolean>;
  /**
   * Holds the decision's slots for another lease from now, for a response that streams longer
   * than the lease. Resolves true when they were still held; false when the lease had ended (the
   * slots are then free for others, and the decision holds none), or it held none.
   */
  renew(decision: Decision): Promise<boolean>;
  /**
   * Lets the refunds, penalties, releases and renewals under way finish (each within the store's
   * deadline), then stops timers and closes the stores the limiter created, and the client it
   * built from `redisUrl`. A client you passed as `redis` stays open.
   */
  close(): Promise<void>;
}

/**
 * Core-internal: what the HTTP layer's `shed` needs of the limiters it builds, to send the
 * fleet's count and an identity's policies in one script call. Not part of the public API.
 */
export interface LimiterLegs {
  /**
   * A consume of `key` made ready to be sent ahead of another limiter's; undefined for an
   * unknown tier. A call gone wrong throws its TypeError.
   */
  prepare(key: string, options?: ConsumeOptions): Leg | undefined;
  /** A consume of `key` sent behind `lead`; undefined when it must go alone, through `consume`. */
  consumeBeside(
    lead: Leg,
    key: string,
    options?: ConsumeOptions,
  ): Promise<BesideDecisions> | undefined;
  /**
   * A consume, answered at once where the key's quota lease holds enough for it and otherwise as
   * `consume` answers. For the HTTP layer: a hot tenant's request then costs no promise turns for
   * a decision already made. With OpenTelemetry on, always `consume`, which times the decision.
   */
  consumeNow(key: string, options?: ConsumeOptions): Decision | Promise<Decision>;
  /** The limiter's OpenTelemetry, when on: the HTTP layer counts its bans there. */
  readonly telemetry: Telemetry | undefined;
}

const LEGS = Symbol('@sentinel/core limiter legs');

/** The legs of a limiter `createLimiter` built. */
export function legsOf(limiter: Limiter): LimiterLegs {
  return (limiter as Limiter & { [LEGS]: LimiterLegs })[LEGS];
}

/** A decision made at once, from a quota lease, as the promise the public calls return. */
function promised(decided: Decision | Promise<Decision>): Promise<Decision> {
  return decided instanceof Promise ? decided : Promise.resolve(decided);
}

/**
 * Builds a limiter. Past a screen on purpose: `decide`, inside it, is the request path, and
 * reads top to bottom as the steps of one decision, each of which lives in a file of its own.
 */
export function createLimiter(options: LimiterOptions): Limiter {
  const resolved = resolveOptions(options);
  // Last, once every option is known good: it may open a connection.
  const { store, owned, client: ownClient } = resolveStore(options);
  // Undefined but for a memory store given a clock: a store decides on its own clock, and the
  // limiter states its own times (the block cache's) on it too.
  const clock = store.clock;
  const { breakers, blocks, observers, report, telemetry } = resolved;
  // A store that is connected again is probed at once rather than after the cool-down.
  const unsubscribe = breakers && store.onReady?.(() => breakers.probeNow());
  const plans = new Plans(resolved.prefix, resolved.fallback, resolved.plans);
  const failureMode = new FailureMode(resolved.onStoreError);
  const calls = new StoreCalls(store, { ...resolved, clock }, failureMode);
  const adjustments = { plans, calls, blocks, clock, report, observers };
  // Adjustments under way, which `close()` lets finish: a release it cut off would hold its
  // slots until their lease ends, and a refund would be lost.
  const adjusting = new Set<Promise<unknown>>();
  function tracked<T>(adjustment: Promise<T>): Promise<T> {
    adjusting.add(adjustment);
    const settled = () => adjusting.delete(adjustment);
    adjustment.then(settled, settled);
    return adjustment;
  }
  // Quota leases need a store that grants them: Redis. With memory, each decision is local already.
  const leases =
    resolved.quotaLeases && store instanceof RedisStore
      ? new QuotaLeases(resolved.quotaLeases, clock, (request) => tracked(calls.adjust(request)))
      : undefined;

  /** A call's cost: a positive integer, or a TypeError. */
  function costOf(options: ConsumeOptions | undefined): number {
    const cost = options?.cost ?? 1;
    // The default needs no check.
    if (cost !== 1) checkPositiveInteger(cost, 'cost');
    return cost;
  }

  /** The cost of a call for one key, once the key and the cost are checked. */
  function checkedCost(key: string, options: ConsumeOptions | undefined): number {
    checkKey(key);
    return costOf(options);
  }

  /**
   * One consume or peek. A call the code got wrong (a key that is not a string, a bad cost, bad
   * policies of its own) rejects with a TypeError; everything else, an unknown tier included, is
   * answered with a decision, since a tier often comes from data such as an API key's record.
   */
  function decide(
    key: string,
    options: ConsumeOptions | undefined,
    apply: boolean,
  ): Decision | Promise<Decision> {
    // The plan: the call's own policies, its tier's, or the fallback.
    let cost: number;
    let compiled: CompiledPlan | undefined;
    try {
      cost = checkedCost(key, options);
      compiled = plans.of(options?.tier, options?.policies);
    } catch (error) {
      return Promise.reject(error);
    }
    const identity = storageIdentity(key);
    if (compiled === undefined) {
      const error = unknownTierError(options?.tier);
      report(error);
      const decision = failureMode.unknownTier(plans.fallback.plan, error);
      return Promise.resolve(observeDecision(observers, decision, identity, apply, undefined));
    }
    const { plan, layout } = compiled;
    if (!apply) {
      return calls.decide(plan, new IdentityRequest(identity, layout, cost, false, clock?.()));
    }
    // The block cache, when on, answers refusals it knows of.
    const id = blocks && blockId(plan, key);
    if (id !== undefined) {
      const known = blocks?.refusal(id, cost, clock?.() ?? Date.now());
      if (known !== undefined) {
        return Promise.resolve(observeDecision(observers, known, identity, apply, undefined));
      }
    }
    // A hot key's lease, when on, answers from what it holds, or is taken beside this consume.
    if (leases !== undefined && plan.lease === undefined) {
      return leaseOrStore(plan, layout, identity, cost, id);
    }
    return fromStore(plan, new IdentityRequest(identity, layout, cost, true, clock?.()), id);
  }

  /** The store's decision, or the failure mode's; observers hear of it there, with its time. */
  function fromStore(plan: Plan, request: IdentityRequest, id: string | undefined) {
    if (id === undefined) return calls.decide(plan, request);
    return calls.decide(plan, request).then((decision) => {
      blocks?.remember(id, request.cost, clock?.() ?? Date.now(), decision);
      return decision;
    });
  }

  /** A consume answered from the key's quota lease, or by the store, taking one if it is hot. */
  function leaseOrStore(
    plan: Plan,
    layout: KeyLayout,
    identity: string,
    cost: number,
    id: string | undefined,
  ): Decision | Promise<Decision> {
    const book = leases as QuotaLeases;
    const now = book.now();
    const heat = book.heatOf(plan, identity, cost, now);
    // A hot key's requests are mostly spent from its lease, which needs no store request.
    const local = spentFromLease(book, heat, identity, cost, now);
    if (local !== undefined) return local;
    const request = new IdentityRequest(identity, layout, cost, true, clock?.());
    const taking = heat.taking;
    // While a lease is being taken, a consume waits for it: a burst would otherwise go to Redis
    // request by request meanwhile.
    if (taking !== undefined) return taking.then(() => afterTake(book, heat, plan, request, id));
    request.quota = book.take(heat, now);
    const decided = fromStore(plan, request, id).then((decision) =>
      book.settle(heat, request, decision, now),
    );
    if (request.quota !== undefined) heat.taking = decided;
    return decided;
  }

  /**
   * A consume that waited for its key's lease to be taken: spent from it, or by the store if the
   * take brought nothing. It never starts another take: a failing store would otherwise be tried
   * once per waiting request, one after the other.
   */
  function afterTake(
    book: QuotaLeases,
    heat: Heat,
    plan: Plan,
    request: IdentityRequest,
    id: string | undefined,
  ): Decision | Promise<Decision> {
    const local = spentFromLease(book, heat, request.identity, request.cost, book.now());
    return local ?? fromStore(plan, request, id);
  }

  /** The decision of a consume spent from its key's lease, observed; undefined if it cannot be. */
  function spentFromLease(
    book: QuotaLeases,
    heat: Heat,
    identity: string,
    cost: number,
    now: number,
  ): Decision | undefined {
    const local = book.spend(heat, cost, now);
    if (local === undefined) return undefined;
    return observeDecision(observers, local, identity, true, undefined);
  }

  /**
   * A consume sent behind another limiter's in one script call (see StoreCalls.decideBeside);
   * undefined when it must go alone, through `consume`: a call gone wrong, an unknown tier or a
   * refusal the block cache knows of, each answered there as ever, or calls that cannot join.
   */
  function consumeBeside(lead: Leg, key: string, options: ConsumeOptions | undefined) {
    let cost: number;
    let compiled: CompiledPlan | undefined;
    try {
      cost = checkedCost(key, options);
      compiled = plans.of(options?.tier, options?.policies);
    } catch {
      return undefined;
    }
    if (compiled === undefined) return undefined;
    const { plan, layout } = compiled;
    const id = blocks && blockId(plan, key);
    if (id !== undefined && blocks?.refusal(id, cost, clock?.() ?? Date.now()) !== undefined) {
      return undefined;
    }
    const request = new IdentityRequest(storageIdentity(key), layout, cost, true, clock?.());
    const decided = calls.decideBeside(lead, request);
    if (decided === undefined || id === undefined) return decided;
    return decided.then((both) => {
      if (both.own !== undefined) blocks?.remember(id, cost, clock?.() ?? Date.now(), both.own);
      return both;
    });
  }

  /** A consume made ready for another limiter's `consumeBeside`; a call gone wrong throws. */
  function prepare(key: string, options: ConsumeOptions | undefined): Leg | undefined {
    const cost = checkedCost(key, options);
    const compiled = plans.of(options?.tier, options?.policies);
    if (compiled === undefined) return undefined;
    const request = new IdentityRequest(
      storageIdentity(key),
      compiled.layout,
      cost,
      true,
      clock?.(),
    );
    return { request, calls };
  }

  /** A consume or a peek for several identities: its plan's i-th policy for the i-th key. */
  function decideJointly(
    keys: readonly string[],
    options: ConsumeOptions | undefined,
    apply: boolean,
  ) {
    const tier = options?.tier;
    let cost: number;
    let compiled: CompiledPlan | undefined;
    try {
      if (!Array.isArray(keys)) fail('keys', `must be an array of strings, got ${describe(keys)}`);
      for (const key of keys) checkKey(key);
      cost = costOf(options);
      compiled = plans.ofJoint(tier, options?.policies);
    } catch (error) {
      return Promise.reject(error);
    }
    const identities = keys.map(storageIdentity);
    // Spaces appear in no stored identity: the joined identities name the call unambiguously.
    const identity = identities.join(' ');
    if (compiled === undefined) {
      const error = unknownTierError(tier);
      report(error);
      const decision = failureMode.unknownTier(plans.fallback.plan, error);
      return Promise.resolve(observeDecision(observers, decision, identity, apply, undefined));
    }
    const { plan } = compiled;
    if (keys.length !== plan.policies.length) {
      const count = plan.policies.length;
      const problem = `has ${keys.length} keys for ${count} policies; give one key per policy`;
      return Promise.reject(new TypeError(`@sentinel/core: \`keys\` ${problem}`));
    }
    const layout = new JointLayout(resolved.prefix, plan, identities);
    return calls.decide(plan, new IdentityRequest(identity, layout, cost, apply, clock?.()));
  }

  /** A public decision call; with OpenTelemetry on, timed and added to the caller's span. */
  function traced<K>(
    call: (keys: K, options: ConsumeOptions | undefined) => Promise<Decision>,
  ): (keys: K, options?: ConsumeOptions) => Promise<Decision> {
    if (telemetry === undefined) return call;
    return (keys, options) => telemetry.decide(call, keys, options);
  }

  const limiter: Limiter & { [LEGS]: LimiterLegs } = {
    [LEGS]: {
      prepare,
      consumeBeside,
      consumeNow:
        telemetry === undefined
          ? (key, options) => decide(key, options, true)
          : (key, options) => limiter.consume(key, options),
      telemetry,
    },
    consume: traced((key: string, options) => promised(decide(key, options, true))),
    consumeJointly: traced((keys: readonly string[], options) =>
      decideJointly(keys, options, true),
    ),
    peek: traced((key: string, options) => promised(decide(key, options, false))),
    peekJointly: traced((keys: readonly string[], options) => decideJointly(keys, options, false)),
    reset: (key, options) => reset({ plans, store, failureMode, blocks, report }, key, options),
    refund: (key, options) => tracked(refund(adjustments, key, options)),
    penalize: (key, options) => tracked(penalize(adjustments, key, options)),
    release: (decision) => tracked(release(adjustments, decision)),
    renew: (decision) => tracked(renew(adjustments, decision)),
    async close() {
      // Leases end first, giving back what they hold; then every adjustment under way finishes,
      // each within the store's deadline; those begun after this are the store's to fail.
      await leases?.close();
      await Promise.allSettled(adjusting);
      unsubscribe?.();
      failureMode.close();
      if (owned) await store.close();
      // A client built from redisUrl is the limiter's own; one passed as `redis` stays open.
      if (ownClient) await toRedisConnection(ownClient).close();
    },
  };
  return limiter;
}
