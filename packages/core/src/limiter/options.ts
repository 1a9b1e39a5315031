// The limiter's options: what each means, and how each is checked and resolved once.

import {
  type Logger,
  type Observer,
  type Observers,
  resolveObservers,
  StoreHealth,
} from '../observe/observer.ts';
import {
  type OpenTelemetryOptions,
  resolveOpenTelemetry,
  type Telemetry,
} from '../observe/opentelemetry.ts';
import { createReporter } from '../observe/reporter.ts';
import type { SentinelError } from '../shared/errors.ts';
import type { Plan } from '../shared/plan.ts';
import type {
  ConcurrencyPolicyOptions,
  PolicyOptions,
  Store,
  StoreErrorMode,
  TierOptions,
} from '../shared/types.ts';
import {
  checkFunction,
  checkObject,
  checkOneOf,
  describe,
  fail,
  listNames,
  rejectUnknownOptions,
} from '../shared/validation.ts';
import { MemoryStore } from '../stores/memory/memory-store.ts';
import { createRedisClient } from '../stores/redis/client.ts';
import { toRedisConnection } from '../stores/redis/connection.ts';
import { type RedisClient, RedisStore } from '../stores/redis/redis-store.ts';
import { type BlockCache, type BlockCacheOptions, resolveBlockCache } from './block-cache.ts';
import { type CircuitBreakerOptions, CircuitBreakers } from './circuit-breaker.ts';
import { CONCURRENCY_POLICY_FIELDS, POLICY_FIELDS, resolvePlan } from './policy.ts';
import {
  type QuotaLeaseOptions,
  type QuotaLeaseSettings,
  resolveQuotaLeases,
} from './quota-leases.ts';

/**
 * The limiter's options. The fields of one policy (`name`, `limit`, `window`, `algorithm`,
 * `blockFor`: see PolicyOptions) may be written at the top level, as shorthand for
 * `policies: { … }`, and so may a concurrency policy's (`concurrency`, `lease`), alone or beside
 * them; that shorthand cannot be combined with `policies` or `tiers`.
 * @example { limit: 5, window: '1m', blockFor: '10m', redisUrl: 'redis://10.0.0.5:6379' }
 * @example { limit: 100, window: '1m', concurrency: 5 }
 */
export interface LimiterOptions
  extends Partial<PolicyOptions>,
    Partial<Omit<ConcurrencyPolicyOptions, 'name'>> {
  /**
   * Where state lives. Without `store` or `redis`, limiters share one MemoryStore per process.
   * @default the process's shared MemoryStore
   */
  store?: Store;
  /**
   * An ioredis, iovalkey or node-redis client (`Redis` or `Cluster`): shorthand for
   * `store: new RedisStore({ client: redis, timeout, connectTimeout })`. It stays yours to close.
   */
  redis?: RedisClient;
  /**
   * A Redis URL, or several for a Cluster: the limiter builds its own client with
   * `createRedisClient`, and closes it on `close()`.
   * @example 'redis://10.0.0.5:6379'
   */
  redisUrl?: string | readonly string[];
  /**
   * The policies every request must satisfy, when no tier applies.
   * @example [{ limit: 20, window: '1s' }, { limit: 1000, window: '1h' }]
   */
  policies?: TierOptions;
  /**
   * Named sets of policies; `consume(key, { tier })` picks one.
   * @example { FREE: { limit: 10, window: '1m' }, PRO: [{ limit: 100, window: '1m' }, { limit: 20, window: '1s' }] }
   */
  tiers?: Record<string, TierOptions>;
  /** The tier of calls that name none. @default 'FREE' if it exists, else the first tier */
  defaultTier?: string;
  /** @default 'sentinel' */
  prefix?: string;
  /**
   * What a decision does when the store fails: admit, refuse, or apply the same policies in
   * this process's memory.
   * @default 'allow'
   */
  onStoreError?: StoreErrorMode;
  /**
   * Called with every store failure and unknown tier. What it throws becomes a process warning.
   * @default the first failure as a process warning, or through `logger` if given; later ones silent
   */
  onError?: (error: SentinelError) => void;
  /**
   * Ms a Redis call waits while Redis sends nothing and this process is free to hear it, for a
   * store built from `redis` or `redisUrl` (see RedisStoreOptions); refused without them.
   * @default 50
   */
  timeout?: number;
  /**
   * Ms calls wait for the first Redis connection, for a store built from `redis` or `redisUrl`;
   * after that, calls fail at once until it comes up. Refused without them. @default 500
   */
  connectTimeout?: number;
  /**
   * The circuit breaker in front of the store, or false for none. There is one per server: on a
   * Redis Cluster, a failing master trips only the breaker of the identities it serves.
   * @default { failures: 3, cooldownMs: 1000 }
   */
  breaker?: CircuitBreakerOptions | false;
  /**
   * Refuses an identity in process, without a store call, while the store's last refusal of it
   * has a retry time still to come. Off by default: a reset or a raised limit elsewhere is seen
   * only when that time passes. It never admits a request the store would refuse.
   * @default false
   */
  blockCache?: boolean | BlockCacheOptions;
  /**
   * Sees every decision, store failure, and store and breaker transition, with timings: metrics
   * (`prometheusMetrics` from `@sentinel/core/prometheus`), tracing, your own counters.
   * @example { decision: ({ outcome, decision }) => counter.inc({ outcome, tier: decision.tier }) }
   */
  observe?: Observer | readonly Observer[];
  /**
   * Quota leases for hot keys (see docs/leases.md): a process takes a share of a busy key's
   * budget from Redis in one atomic call, as a debit, and decides from it locally until the
   * share is spent or the lease ends. Limits still hold exactly; a crashed process strands its
   * share until the lease ends. Not to be confused with a concurrency policy's `lease`. Off by
   * default; with a memory store, or for a tier with a concurrency policy, it does nothing.
   * @default false
   */
  quotaLeases?: boolean | QuotaLeaseOptions;
  /**
   * Decisions as OpenTelemetry metrics, and as attributes and an event on the caller's active
   * span; each store call as a client span (see docs/observability.md). Through
   * `@opentelemetry/api`, which must then be installed; the global providers unless you pass
   * yours, looked up at each use, so an SDK registered after the limiter still sees everything.
   * @default false
   */
  openTelemetry?: boolean | OpenTelemetryOptions;
  /**
   * A pino-compatible logger. It gets one line when a store server goes down or comes back and
   * when a breaker opens or closes, never one per request; without `onError`, other errors are
   * logged once per code, in place of the process warning.
   * @default none: the first error becomes a process warning
   */
  logger?: Logger;
}

/**
 * Every key of LimiterOptions but the policy fields, which POLICY_FIELDS lists: checked against
 * the interface so that the two cannot drift.
 */
const LIMITER_OPTIONS = {
  store: true,
  redis: true,
  redisUrl: true,
  policies: true,
  tiers: true,
  defaultTier: true,
  prefix: true,
  onStoreError: true,
  onError: true,
  timeout: true,
  connectTimeout: true,
  breaker: true,
  blockCache: true,
  observe: true,
  logger: true,
  quotaLeases: true,
  openTelemetry: true,
} as const satisfies Record<
  Exclude<keyof LimiterOptions, keyof PolicyOptions | keyof ConcurrencyPolicyOptions>,
  true
>;

/** The shorthand's fields: a rate policy's, then a concurrency policy's own. */
export const SHORTHAND_FIELDS: readonly (keyof LimiterOptions)[] = Object.freeze([
  ...POLICY_FIELDS,
  ...CONCURRENCY_POLICY_FIELDS.filter((field) => field !== 'name'),
]);

/** The options createLimiter takes, the shorthand's policy fields included; any other is refused. */
export const LIMITER_OPTION_NAMES: readonly string[] = Object.freeze([
  ...Object.keys(LIMITER_OPTIONS),
  ...SHORTHAND_FIELDS,
]);

/** What `onStoreError` may say. */
export const STORE_ERROR_MODES = [
  'allow',
  'deny',
  'local',
] as const satisfies readonly StoreErrorMode[];

/** A key prefix: the hash tag that follows it must be the key's first `{`. */
export function checkPrefix(prefix: unknown): asserts prefix is string {
  if (typeof prefix !== 'string' || prefix.length === 0 || /[{}]/.test(prefix)) {
    fail('prefix', 'must be a non-empty string without `{` or `}`, which would break the hash tag');
  }
}

/** Every option but the store, checked and resolved. */
export interface ResolvedOptions {
  readonly prefix: string;
  readonly onStoreError: StoreErrorMode;
  readonly plans: ReadonlyMap<string, Plan>;
  /** The plan of calls that name no tier. */
  readonly fallback: Plan;
  readonly report: (error: SentinelError) => void;
  readonly breakers: CircuitBreakers | undefined;
  readonly blocks: BlockCache | undefined;
  /** Undefined when nothing observes the limiter: the request path then does no bookkeeping. */
  readonly observers: Observers | undefined;
  /** Tracks which servers are down, while someone listens for the transitions. */
  readonly health: StoreHealth | undefined;
  /** Undefined when quota leases are off. */
  readonly quotaLeases: QuotaLeaseSettings | undefined;
  /** Undefined when OpenTelemetry is off. */
  readonly telemetry: Telemetry | undefined;
}

/**
 * Core-internal: the telemetry a limiter built inside another takes over, with what its
 * decisions mean there (the fleet's count of `shed`). Not part of the public API.
 */
export const TELEMETRY = Symbol('@sentinel/core telemetry');

/** Checks every option but the store's, which may connect and so comes last. */
export function resolveOptions(options: LimiterOptions): ResolvedOptions {
  checkObject(options, 'options');
  rejectUnknownOptions(options, LIMITER_OPTION_NAMES, '@sentinel/core');
  const {
    prefix = 'sentinel',
    onStoreError = 'allow',
    onError,
    breaker: breakerOptions,
    blockCache,
    observe,
    logger,
  } = options;
  checkPrefix(prefix);
  checkOneOf(onStoreError, STORE_ERROR_MODES, 'onStoreError');
  if (onError !== undefined) checkFunction(onError, 'onError');
  const { plans, fallback } = resolvePlans(options);
  const telemetry =
    (options as { [TELEMETRY]?: Telemetry })[TELEMETRY] ??
    resolveOpenTelemetry(options.openTelemetry);
  const observers = resolveObservers(observe, logger, telemetry);
  const breakers =
    breakerOptions === false ? undefined : new CircuitBreakers(breakerOptions, observers?.breaker);
  const health = observers?.store && new StoreHealth(observers.store);
  const blocks = resolveBlockCache(blockCache);
  const quotaLeases = resolveQuotaLeases(options.quotaLeases);
  // The limiter reports only SentinelErrors, so an onError typed for them receives nothing else.
  const report = createReporter(
    onError as ((error: Error) => void) | undefined,
    '@sentinel/core',
    logger,
  );
  return {
    prefix,
    onStoreError,
    plans,
    fallback,
    report,
    breakers,
    blocks,
    observers,
    health,
    quotaLeases,
    telemetry,
  };
}

/**
 * The policies written at the top level, and the first field given; undefined when there are
 * none. A rate policy's fields make one policy and `concurrency` and `lease` another, beside it;
 * `name` names the rate policy, or the concurrency policy when it stands alone.
 */
function shorthandOf(
  options: LimiterOptions,
): { policies: TierOptions; first: string } | undefined {
  const given: readonly string[] = SHORTHAND_FIELDS.filter((field) => options[field] !== undefined);
  if (given.length === 0) return undefined;
  const pick = (fields: readonly string[]): object =>
    Object.fromEntries(
      fields
        .filter((field) => given.includes(field))
        .map((field) => [field, options[field as keyof LimiterOptions]]),
    );
  const rate = given.some((field) => field !== 'name' && POLICY_FIELDS.includes(field as never));
  const concurrent = given.includes('concurrency') || given.includes('lease');
  const first = given[0] as string;
  if (!concurrent) return { policies: pick(POLICY_FIELDS) as PolicyOptions, first };
  const slots = pick(CONCURRENCY_POLICY_FIELDS.filter((f) => rate === false || f !== 'name'));
  if (!rate) return { policies: slots as ConcurrencyPolicyOptions, first };
  return {
    policies: [pick(POLICY_FIELDS) as PolicyOptions, slots as ConcurrencyPolicyOptions],
    first,
  };
}

function resolvePlans(options: LimiterOptions): { plans: Map<string, Plan>; fallback: Plan } {
  const { policies, tiers, defaultTier } = options;
  const shorthand = shorthandOf(options);
  const given = [policies !== undefined && 'policies', shorthand?.first, tiers && 'tiers'];
  const chosen = given.filter((name): name is string => typeof name === 'string');
  if (chosen.length === 0)
    fail('policies', 'is required: pass `policies`, `limit` and `window`, or `tiers`');
  if (chosen.length > 1) {
    const why = shorthand
      ? `: a policy's fields at the top level (${listNames(SHORTHAND_FIELDS)}) are shorthand for \`policies\``
      : '';
    fail(String(chosen[1]), `cannot be combined with \`${chosen[0]}\`${why}`);
  }
  const plans = new Map<string, Plan>();
  if (!tiers) {
    if (defaultTier !== undefined) fail('defaultTier', 'needs `tiers`');
    if (policies !== undefined) return { plans, fallback: resolvePlan(policies, 'policies') };
    // The shorthand's fields are top-level options: errors name them bare, as `window`.
    return { plans, fallback: resolvePlan((shorthand as { policies: TierOptions }).policies, '') };
  }
  if (typeof tiers !== 'object') fail('tiers', 'must be an object of tier name to policies');
  for (const [tier, tierPolicies] of Object.entries(tiers)) {
    plans.set(tier, resolvePlan(tierPolicies, `tiers.${tier}`, tier));
  }
  if (plans.size === 0) fail('tiers', 'must name at least one tier');
  const name = defaultTier ?? (plans.has('FREE') ? 'FREE' : (plans.keys().next().value as string));
  const fallback = plans.get(name);
  if (!fallback) fail('defaultTier', `names no tier: ${describe(name)}`);
  return { plans, fallback };
}

/**
 * The store of limiters given neither `store` nor `redis`: one per process, like a Redis all
 * gateways share, so that what shares a budget (prefix, group, policy) does not depend on the
 * store. It is closed when the last limiter using it closes.
 */
let sharedMemory: { store: MemoryStore; users: number } | undefined;

function acquireSharedMemory(): Store {
  sharedMemory ??= { store: new MemoryStore(), users: 0 };
  sharedMemory.users++;
  const { store } = sharedMemory;
  let released = false;
  return {
    evaluate: (request) => store.evaluate(request),
    reset: (keys) => store.reset(keys),
    close() {
      if (released) return;
      released = true;
      if (sharedMemory?.store === store && --sharedMemory.users === 0) {
        sharedMemory = undefined;
        store.close();
      }
    },
  };
}

export function resolveStore(options: LimiterOptions): {
  store: Store;
  owned: boolean;
  client?: RedisClient;
} {
  const { store, redis, redisUrl, timeout, connectTimeout } = options;
  if (redis !== undefined && redisUrl !== undefined) {
    fail('redisUrl', 'cannot be combined with `redis`');
  }
  if (store !== undefined) {
    if (redis !== undefined) fail('redis', 'cannot be combined with `store`');
    if (redisUrl !== undefined) fail('redisUrl', 'cannot be combined with `store`');
    for (const [name, value] of Object.entries({ timeout, connectTimeout })) {
      if (value !== undefined)
        fail(name, 'belongs to the store: pass it to the RedisStore you give as `store`');
    }
    if (typeof store?.evaluate !== 'function')
      fail('store', 'must be a RedisStore, a MemoryStore or another Store');
    return { store, owned: false };
  }
  if (redis !== undefined) {
    // Checked here so that the error names `redis`, not the store's `client`.
    toRedisConnection(redis, 'redis');
    return { store: redisStore(redis, timeout, connectTimeout), owned: true };
  }
  if (redisUrl !== undefined) {
    const client = createRedisClient(redisUrl);
    return { store: redisStore(client, timeout, connectTimeout), owned: true, client };
  }
  // Memory never keeps a call waiting: a deadline given here would be silently ignored.
  for (const [name, value] of Object.entries({ timeout, connectTimeout })) {
    if (value !== undefined) {
      fail(
        name,
        'applies to a Redis store only: pass `redis` or `redisUrl` with it, or leave it out for the memory store',
      );
    }
  }
  return { store: acquireSharedMemory(), owned: true };
}

/** A RedisStore on `client` with the limiter's `timeout` and `connectTimeout`, where given. */
export function redisStore(
  client: RedisClient,
  timeout: number | undefined,
  connectTimeout: number | undefined,
): RedisStore {
  return new RedisStore({
    client,
    ...(timeout !== undefined && { timeout }),
    ...(connectTimeout !== undefined && { connectTimeout }),
  });
}
