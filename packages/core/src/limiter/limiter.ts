// createLimiter: resolves options once, then each consume is one store call and a decision.

import type { DecisionEvent } from '../observe/observer.ts';
import { SentinelError } from '../shared/errors.ts';
import { storageIdentity } from '../shared/fingerprint.ts';
import type { ConsumeOptions, Decision, Store, StoreReply } from '../shared/types.ts';
import { checkObject, checkPositiveInteger, describe, fail } from '../shared/validation.ts';
import { MemoryStore } from '../stores/memory/memory-store.ts';
import { toRedisConnection } from '../stores/redis/connection.ts';
import { IdentityRequest, KeyLayout, type LateReplyListener } from '../stores/store-keys.ts';
import type { CircuitBreaker } from './circuit-breaker.ts';
import { fixedDecision, LimiterDecision, toDecision } from './decision.ts';
import { lateReply } from './late-reply.ts';
import {
  type LimiterOptions,
  type ResolvedOptions,
  resolveOptions,
  resolveStore,
} from './options.ts';
import { type CompiledPlan, PlanCache } from './plan-cache.ts';
import type { Plan } from './policy.ts';

export { LIMITER_OPTION_NAMES, type LimiterOptions } from './options.ts';

export interface Limiter {
  /**
   * Consumes `cost` (default 1) from every policy of the key's tier, or from none. A key that is
   * not a string, or a cost that is not a positive integer, rejects with a TypeError; an unknown
   * tier is reported to `onError` and answered by `onStoreError`.
   */
  consume(key: string, options?: ConsumeOptions): Promise<Decision>;
  /** The decision consume would make now, without consuming anything. */
  peek(key: string, options?: ConsumeOptions): Promise<Decision>;
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
   * Stops timers and closes the stores the limiter created, and the client it built from
   * `redisUrl`. A client you passed as `redis` stays open.
   */
  close(): Promise<void>;
}

/** What the request path, the failure path and reset share, resolved once. */
interface Parts extends ResolvedOptions {
  readonly store: Store;
  /** Decides in this process's memory while the store fails, for `onStoreError: 'local'`. */
  readonly local: MemoryStore | undefined;
  /** Each plan's keys under this limiter's prefix. */
  readonly layouts: ReadonlyMap<Plan, KeyLayout>;
  /** The fallback plan's, without a lookup: calls that name no tier are the usual kind. */
  readonly fallbackLayout: KeyLayout;
  /** The one breaker of a store that is one server, looked up once rather than per call. */
  readonly breaker: CircuitBreaker | undefined;
  /** Plans for the policies calls bring with them. */
  readonly ownPlans: PlanCache;
  /** Hears of replies that came after the store gave up on a call: see `lateReply`. */
  readonly late: LateReplyListener;
}

export interface RefundOptions {
  /** The decision `consume` resolved with for this key. */
  decision: Decision;
  /** Units to give back: a positive integer. @default what the decision took and has not had back */
  cost?: number;
}

export function createLimiter(options: LimiterOptions): Limiter {
  const resolved = resolveOptions(options);
  // Last, once every option is known good: it may open a connection.
  const { store, owned, client: ownClient } = resolveStore(options);
  const { breakers } = resolved;
  // A store that is connected again is probed at once rather than after the cool-down.
  const unsubscribe = breakers && store.onReady?.(() => breakers.probeNow());
  const local = resolved.onStoreError === 'local' ? new MemoryStore() : undefined;
  const layouts = new Map<Plan, KeyLayout>();
  for (const plan of [resolved.fallback, ...resolved.plans.values()]) {
    layouts.set(plan, new KeyLayout(resolved.prefix, plan));
  }
  const breaker = store.serverOf === undefined ? breakers?.of('') : undefined;
  const fallbackLayout = layouts.get(resolved.fallback) as KeyLayout;
  const ownPlans = new PlanCache(resolved.prefix);
  const late: LateReplyListener = (request, reply) =>
    lateReply(parts, request, reply, (refund) => adjust(parts, refund, false));
  const parts: Parts = {
    ...resolved,
    store,
    local,
    layouts,
    fallbackLayout,
    breaker,
    ownPlans,
    late,
  };
  return {
    consume: (key, options) => decide(parts, key, options, true),
    peek: (key, options) => decide(parts, key, options, false),
    reset: (key, options) => resetKey(parts, key, options),
    refund: (key, options) => refund(parts, key, options),
    penalize: (key, options) => penalize(parts, key, options),
    async close() {
      unsubscribe?.();
      local?.close();
      if (owned) await store.close();
      // A client built from redisUrl is the limiter's own; one passed as `redis` stays open.
      if (ownClient) await toRedisConnection(ownClient).close();
    },
  };
}

// --- The request path ---------------------------------------------------------------------------

/**
 * One consume or peek. A call the code got wrong (a key that is not a string, a bad cost)
 * rejects with a TypeError; everything else, an unknown tier included, is answered with a
 * decision, since a tier often comes from data such as an API key's record.
 */
function decide(
  parts: Parts,
  key: string,
  options: ConsumeOptions | undefined,
  apply: boolean,
): Promise<Decision> {
  let cost: number;
  const tier = options?.tier;
  const own = options?.policies;
  let compiled: CompiledPlan | undefined;
  try {
    checkKey(key);
    cost = options?.cost ?? 1;
    // The default needs no check.
    if (cost !== 1) checkPositiveInteger(cost, 'cost');
    if (own !== undefined) compiled = parts.ownPlans.of(own, tier);
  } catch (error) {
    return Promise.reject(error);
  }
  const plan = compiled?.plan ?? planFor(parts, tier);
  if (plan === undefined) {
    const decision = unknownTierDecision(parts, tier);
    parts.observers?.decision?.(decisionEvent(decision, storageIdentity(key), apply, undefined));
    return Promise.resolve(decision);
  }
  const request = new IdentityRequest(
    storageIdentity(key),
    compiled?.layout ??
      (tier === undefined ? parts.fallbackLayout : (parts.layouts.get(plan) as KeyLayout)),
    cost,
    apply,
    parts.clock?.(),
  );
  return consult(parts, plan, key, request);
}

/** Tells the observers of a decision, where there are any; returns the decision. */
function observed(
  parts: Parts,
  request: IdentityRequest,
  decision: Decision,
  storeMs: number | undefined,
): Decision {
  parts.observers?.decision?.(decisionEvent(decision, request.identity, request.apply, storeMs));
  return decision;
}

function decisionEvent(
  decision: Decision,
  identity: string,
  consumed: boolean,
  storeMs: number | undefined,
): DecisionEvent {
  const outcome =
    decision.degraded !== undefined ? 'degraded' : decision.allowed ? 'allowed' : 'limited';
  return { decision, identity, consumed, outcome, storeMs };
}

/** The block cache, when on, answers refusals it knows of; the store decides the rest. */
function consult(
  parts: Parts,
  plan: Plan,
  key: string,
  request: IdentityRequest,
): Promise<Decision> {
  const { blocks } = parts;
  if (blocks === undefined || !request.apply) return evaluate(parts, plan, request);
  const cost = request.cost;
  const id = blockId(plan, key);
  const refusal = blocks.refusal(id, cost, parts.clock?.() ?? Date.now());
  if (refusal !== undefined) return Promise.resolve(observed(parts, request, refusal, undefined));
  return evaluate(parts, plan, request).then((decision) => {
    blocks.remember(id, cost, parts.clock?.() ?? Date.now(), decision);
    return decision;
  });
}

/** Plans whose policies share names and algorithms share state keys, and so their blocks. */
function blockId(plan: Plan, key: string): string {
  return `${plan.keySuffixes.join('')}\u0000${key}`;
}

function checkKey(key: unknown): asserts key is string {
  if (typeof key !== 'string') fail('key', `must be a string, got ${describe(key)}`);
}

function planFor(parts: Parts, tier: string | undefined): Plan | undefined {
  return tier === undefined ? parts.fallback : parts.plans.get(tier);
}

/** The store keys of one identity under a plan: one per policy, all under one hash tag. */
function keysOf(parts: Parts, key: string, plan: Plan): string[] {
  return (parts.layouts.get(plan) as KeyLayout).keysOf(storageIdentity(key));
}

/** Asks the store, unless the breaker of the server holding the keys is open. */
function evaluate(parts: Parts, plan: Plan, request: IdentityRequest): Promise<Decision> {
  const { store, breakers } = parts;
  const breaker = parts.breaker ?? breakers?.of(store.serverOf?.(request.keys) ?? '');
  const sentAt = Date.now();
  request.sentAt = sentAt;
  if (breaker && !breaker.allow(sentAt)) return Promise.resolve(degrade(parts, plan, request));
  request.lateListener = parts.late;
  // Timed only for observers: performance.now() is a cost the unobserved path does not pay.
  const startedAt = parts.observers?.decision && performance.now();
  let reply: StoreReply | Promise<StoreReply>;
  try {
    reply = store.evaluate(request);
  } catch (error) {
    return Promise.resolve(failed(parts, plan, request, error, breaker));
  }
  // The memory store answers synchronously: no promise to wait on.
  if (!(reply instanceof Promise)) {
    return Promise.resolve(answered(parts, plan, request, breaker, startedAt, reply));
  }
  return reply.then(
    (value) => answered(parts, plan, request, breaker, startedAt, value),
    (error: unknown) => failed(parts, plan, request, error, breaker),
  );
}

/** A reply from the store: the breaker and the health hear of it, and observers of its time. */
function answered(
  parts: Parts,
  plan: Plan,
  request: IdentityRequest,
  breaker: CircuitBreaker | undefined,
  startedAt: number | undefined,
  reply: StoreReply,
): Decision {
  breaker?.success();
  if (parts.health?.anyDown) parts.health.answered(serverOf(parts, request));
  const decision = toDecision(plan, reply);
  if (request.apply && decision.allowed) {
    // The request is the charge: its keys, policies and cost, and when the store charged it.
    request.chargedAt = reply.at;
    request.left = request.cost;
    LimiterDecision.keep(decision, request);
  }
  if (startedAt === undefined) return decision;
  return observed(parts, request, decision, performance.now() - startedAt);
}

/** The server holding a request's keys: '' for a store that is one server. */
function serverOf(parts: Parts, request: IdentityRequest): string {
  return parts.store.serverOf?.(request.keys) ?? '';
}

// --- When the store fails, or the tier is unknown ----------------------------------------------

function asSentinelError(error: unknown): SentinelError {
  return error instanceof SentinelError
    ? error
    : new SentinelError('STORE_FAILED', error instanceof Error ? error.message : String(error), {
        cause: error,
      });
}

function failed(
  parts: Parts,
  plan: Plan,
  request: IdentityRequest,
  error: unknown,
  breaker: CircuitBreaker | undefined,
): Decision {
  const failure = storeFailed(parts, request, error, breaker);
  parts.report(failure);
  return degrade(parts, plan, request, failure);
}

/** A store call that failed: the breaker, the health and the observers hear of it. */
function storeFailed(
  parts: Parts,
  request: IdentityRequest,
  error: unknown,
  breaker: CircuitBreaker | undefined,
): SentinelError {
  const failure = asSentinelError(error);
  // A store that answers, however late, is not down: only silence and failures trip the breaker.
  if (failure.code === 'STORE_BUSY') breaker?.success();
  else breaker?.failure(Date.now());
  const { health, observers } = parts;
  if (health || observers?.storeError) {
    const server = serverOf(parts, request);
    health?.failed(server, failure);
    observers?.storeError?.({ server, error: failure });
  }
  return failure;
}

/** The decision `onStoreError` makes without the store. */
function degrade(
  parts: Parts,
  plan: Plan,
  request: IdentityRequest,
  error?: SentinelError,
): Decision {
  const { onStoreError, local } = parts;
  let decision: Decision;
  if (onStoreError === 'deny') {
    decision = fixedDecision(plan, false, 1000, 'deny');
  } else if (local) {
    // Decided now, which may be a while after the store was asked.
    request.sentAt = Date.now();
    decision = toDecision(plan, local.evaluate(request), 'local');
  } else {
    decision = fixedDecision(plan, true, 0, 'allow');
  }
  if (error) decision.error = error;
  return observed(parts, request, decision, undefined);
}

function unknownTier(parts: Parts, tier: unknown): SentinelError {
  const error = new SentinelError('UNKNOWN_TIER', `No tier named ${describe(tier)}`);
  parts.report(error);
  return error;
}

/**
 * Applying some other tier's limits would be a guess, and counting in memory would count under
 * no known policy: the failure mode decides, admitting or refusing, and the decision says so.
 */
function unknownTierDecision(parts: Parts, tier: unknown): Decision {
  const error = unknownTier(parts, tier);
  const deny = parts.onStoreError === 'deny';
  const decision = fixedDecision(parts.fallback, !deny, 1000, deny ? 'deny' : 'allow');
  decision.error = error;
  return decision;
}

// --- Reset --------------------------------------------------------------------------------------

/**
 * Deletes a key's state for one tier, or for all. Like consume, a key that is not a string
 * rejects with a TypeError, and an unknown tier is reported to `onError`: it holds no state, so
 * nothing is deleted.
 */
async function resetKey(
  parts: Parts,
  key: string,
  options: Pick<ConsumeOptions, 'tier' | 'policies'> | undefined,
): Promise<void> {
  checkKey(key);
  const tier = options?.tier;
  let chosen: Plan[];
  if (options?.policies !== undefined) {
    const { plan, layout } = parts.ownPlans.of(options.policies, tier);
    parts.blocks?.forget(blockId(plan, key));
    const keys = layout.keysOf(storageIdentity(key));
    await parts.store.reset(keys);
    await parts.local?.reset(keys);
    return;
  }
  if (tier === undefined) {
    chosen = [parts.fallback, ...parts.plans.values()];
  } else {
    const plan = parts.plans.get(tier);
    if (plan === undefined) {
      unknownTier(parts, tier);
      return;
    }
    chosen = [plan];
  }
  for (const plan of chosen) parts.blocks?.forget(blockId(plan, key));
  const keys = [...new Set(chosen.flatMap((plan) => keysOf(parts, key, plan)))];
  await parts.store.reset(keys);
  await parts.local?.reset(keys);
}

// --- Refund and penalty --------------------------------------------------------------------------

async function refund(parts: Parts, key: string, options: RefundOptions): Promise<boolean> {
  checkKey(key);
  checkObject(options, 'options', '{ decision, cost? }');
  const { decision, cost } = options;
  checkObject(decision, 'decision', 'the decision consume resolved with');
  if (cost !== undefined) checkPositiveInteger(cost, 'cost');
  const charge = LimiterDecision.chargeOf(decision) as IdentityRequest | undefined;
  // A decision that consumed nothing, or whose store cannot say when it charged, has nothing to give.
  if (charge === undefined || charge.left === 0 || charge.chargedAt === undefined) return false;
  const { identity, layout } = charge;
  if (storageIdentity(key) !== identity) {
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
    await adjust(parts, request);
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

async function penalize(
  parts: Parts,
  key: string,
  options: ConsumeOptions | undefined,
): Promise<Decision> {
  checkKey(key);
  const cost = options?.cost ?? 1;
  checkPositiveInteger(cost, 'cost');
  const tier = options?.tier;
  const compiled = options?.policies && parts.ownPlans.of(options.policies, tier);
  const plan = compiled?.plan ?? planFor(parts, tier);
  if (plan === undefined) throw unknownTier(parts, tier);
  const layout = compiled?.layout ?? (parts.layouts.get(plan) as KeyLayout);
  const request = new IdentityRequest(storageIdentity(key), layout, cost, false, parts.clock?.());
  request.adjust = { kind: 'penalize' };
  return toDecision(plan, await adjust(parts, request));
}

/**
 * Sends a penalty or a refund: through the breaker (`gated`), failing with a SentinelError, never
 * degraded. A refund of a consume admitted late neither waits for the breaker nor moves it: the
 * server it goes to has just answered, an open breaker would leave the consume's cost taken for
 * good, and the breaker's cool-down is for the decisions, which it keeps off a failing server.
 */
async function adjust(parts: Parts, request: IdentityRequest, gated = true): Promise<StoreReply> {
  const { store, breakers } = parts;
  const breaker = gated
    ? (parts.breaker ?? breakers?.of(store.serverOf?.(request.keys) ?? ''))
    : undefined;
  request.sentAt = Date.now();
  request.lateListener = parts.late;
  if (breaker && !breaker.allow(request.sentAt)) {
    throw new SentinelError(
      'STORE_UNAVAILABLE',
      'The circuit breaker is open: the store is failing',
    );
  }
  try {
    const reply = await store.evaluate(request);
    breaker?.success();
    if (parts.health?.anyDown) parts.health.answered(serverOf(parts, request));
    return reply;
  } catch (error) {
    throw storeFailed(parts, request, error, breaker);
  }
}
