// createLimiter: resolves options once, then each consume is one store call and a decision.
import {
  type CircuitBreaker,
  type CircuitBreakerOptions,
  CircuitBreakers,
} from './circuit-breaker.ts';
import { fixedDecision, toDecision } from './decision.ts';
import { SentinelError } from './errors.ts';
import { storageIdentity } from './fingerprint.ts';
import { MemoryStore } from './memory-store.ts';
import { type Plan, resolvePlan } from './policy.ts';
import { createRedisClient } from './redis-client.ts';
import { toRedisConnection } from './redis-connection.ts';
import { type RedisClient, RedisStore } from './redis-store.ts';
import type {
  Algorithm,
  ConsumeOptions,
  Decision,
  Store,
  StoreErrorMode,
  StoreReply,
  StoreRequest,
  TierOptions,
  Window,
} from './types.ts';

export interface LimiterOptions {
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
  /** Shorthand for one policy: `policies: { limit, window, algorithm }`. */
  limit?: number;
  window?: Window;
  algorithm?: Algorithm;
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
  /** Reports every store failure and unknown tier. */
  onError?: (error: SentinelError) => void;
  /**
   * Ms a Redis call waits while Redis sends nothing and this process is free to hear it, for a
   * store built from `redis` or `redisUrl` (see RedisStoreOptions). @default 50
   */
  timeout?: number;
  /**
   * Ms calls wait for the first Redis connection, for a store built from `redis` or `redisUrl`;
   * after that, calls fail at once until it comes up. @default 500
   */
  connectTimeout?: number;
  /**
   * The circuit breaker in front of the store, or false for none. There is one per server: on a
   * Redis Cluster, a failing master trips only the breaker of the identities it serves.
   */
  breaker?: CircuitBreakerOptions | false;
  /** Unix ms for the scripts to use instead of the Redis clock: for tests. @default Redis `TIME` */
  clock?: () => number;
}

export interface Limiter {
  /** Consumes `cost` (default 1) from every policy of the key's tier, or from none. */
  consume(key: string, options?: ConsumeOptions): Promise<Decision>;
  /** The decision consume would make now, without consuming anything. */
  peek(key: string, options?: ConsumeOptions): Promise<Decision>;
  /** Deletes the key's state: for the tier named, or for every tier. */
  reset(key: string, options?: Pick<ConsumeOptions, 'tier'>): Promise<void>;
  /**
   * Stops timers and closes the stores the limiter created, and the client it built from
   * `redisUrl`. A client you passed as `redis` stays open.
   */
  close(): Promise<void>;
}

const MODES: readonly StoreErrorMode[] = ['allow', 'deny', 'local'];

function fail(option: string, problem: string): never {
  throw new TypeError(`@sentinel/core: \`${option}\` ${problem}`);
}

function resolvePlans(options: LimiterOptions): { plans: Map<string, Plan>; fallback: Plan } {
  const { policies, limit, window, algorithm, tiers, defaultTier } = options;
  const shorthand = limit !== undefined || window !== undefined || algorithm !== undefined;
  const given = [policies !== undefined && 'policies', shorthand && 'limit', tiers && 'tiers'];
  const chosen = given.filter(Boolean);
  if (chosen.length === 0)
    fail('policies', 'is required: pass `policies`, `limit` and `window`, or `tiers`');
  if (chosen.length > 1) fail(String(chosen[1]), `cannot be combined with \`${chosen[0]}\``);
  const plans = new Map<string, Plan>();
  if (!tiers) {
    if (defaultTier !== undefined) fail('defaultTier', 'needs `tiers`');
    const single = policies ?? { limit: limit as number, window: window as Window, algorithm };
    return { plans, fallback: resolvePlan(single, policies ? 'policies' : 'limit') };
  }
  if (typeof tiers !== 'object') fail('tiers', 'must be an object of tier name to policies');
  for (const [tier, tierPolicies] of Object.entries(tiers)) {
    plans.set(tier, resolvePlan(tierPolicies, `tiers.${tier}`, tier));
  }
  if (plans.size === 0) fail('tiers', 'must name at least one tier');
  const name = defaultTier ?? (plans.has('FREE') ? 'FREE' : (plans.keys().next().value as string));
  const fallback = plans.get(name);
  if (!fallback) fail('defaultTier', `names no tier: '${name}'`);
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

function resolveStore(options: LimiterOptions): {
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
    if (typeof store.evaluate !== 'function')
      fail('store', 'must be a RedisStore, a MemoryStore or another Store');
    return { store, owned: false };
  }
  if (redis !== undefined || redisUrl !== undefined) {
    const client = redis ?? createRedisClient(redisUrl as string | readonly string[]);
    const options = {
      client,
      ...(timeout !== undefined && { timeout }),
      ...(connectTimeout !== undefined && { connectTimeout }),
    };
    const built = new RedisStore(options);
    return redis === undefined
      ? { store: built, owned: true, client }
      : { store: built, owned: true };
  }
  return { store: acquireSharedMemory(), owned: true };
}

export function createLimiter(options: LimiterOptions): Limiter {
  if (typeof options !== 'object' || options === null) fail('options', 'must be an object');
  const {
    prefix = 'sentinel',
    onStoreError = 'allow',
    onError,
    clock,
    breaker: breakerOptions,
  } = options;
  if (typeof prefix !== 'string' || prefix.length === 0 || /[{}]/.test(prefix)) {
    fail('prefix', 'must be a non-empty string without `{` or `}`, which would break the hash tag');
  }
  if (!MODES.includes(onStoreError))
    fail('onStoreError', `must be one of ${MODES.join(', ')}, got ${String(onStoreError)}`);
  if (onError !== undefined && typeof onError !== 'function') fail('onError', 'must be a function');
  if (clock !== undefined && typeof clock !== 'function')
    fail('clock', 'must be a function returning Unix milliseconds');
  const { plans, fallback } = resolvePlans(options);
  const breakers = breakerOptions === false ? undefined : new CircuitBreakers(breakerOptions);
  // Last, once every option is known good: it may open a connection.
  const { store, owned, client: ownClient } = resolveStore(options);
  // A store that is connected again is probed at once rather than after the cool-down.
  const unsubscribe = breakers && store.onReady?.(() => breakers.probeNow());
  const local = onStoreError === 'local' ? new MemoryStore() : undefined;
  let warned = false;

  function report(error: SentinelError): void {
    if (onError) {
      onError(error);
    } else if (!warned) {
      warned = true;
      process.emitWarning(
        `${error.message} (further store errors are silent without onError)`,
        'SentinelWarning',
      );
    }
  }

  function degrade(plan: Plan, request: StoreRequest, error?: SentinelError): Decision {
    const decision =
      onStoreError === 'deny'
        ? fixedDecision(plan, false, 1000, 'deny')
        : local
          ? toDecision(plan, local.evaluate(request), 'local')
          : fixedDecision(plan, true, 0, 'allow');
    if (error) decision.error = error;
    return decision;
  }

  function planFor(tier: string | undefined): Plan | undefined {
    return tier === undefined ? fallback : plans.get(tier);
  }

  function request(
    key: string,
    options: ConsumeOptions | undefined,
    apply: boolean,
  ): Promise<Decision> {
    if (typeof key !== 'string')
      return Promise.reject(new TypeError('@sentinel/core: the key must be a string'));
    const cost = options?.cost ?? 1;
    if (!Number.isSafeInteger(cost) || cost < 1) {
      return Promise.reject(
        new TypeError(`@sentinel/core: \`cost\` must be a positive integer, got ${String(cost)}`),
      );
    }
    const tier = options?.tier;
    const plan = planFor(tier);
    if (plan === undefined) {
      const error = new SentinelError('UNKNOWN_TIER', `No tier named '${String(tier)}'`);
      report(error);
      // Applying some other tier's limits would be a guess; the failure mode is the user's choice.
      const deny = onStoreError === 'deny';
      const decision = fixedDecision(fallback, !deny, 1000, deny ? 'deny' : 'allow');
      decision.error = error;
      return Promise.resolve(decision);
    }
    const base = `${prefix}:{${storageIdentity(key)}}`;
    const req: StoreRequest = {
      keys:
        plan.keySuffixes.length === 1
          ? [base + plan.keySuffixes[0]]
          : plan.keySuffixes.map((s) => base + s),
      policies: plan.policies,
      script: plan.script,
      args: plan.args,
      cost,
      apply,
      now: clock?.(),
    };
    const breaker = breakers?.of(store.serverOf?.(req.keys) ?? '');
    if (breaker && !breaker.allow(Date.now())) return Promise.resolve(degrade(plan, req));
    let reply: StoreReply | Promise<StoreReply>;
    try {
      reply = store.evaluate(req);
    } catch (error) {
      return Promise.resolve(failed(plan, req, error, breaker));
    }
    if (!(reply instanceof Promise)) {
      breaker?.success();
      return Promise.resolve(toDecision(plan, reply));
    }
    return reply.then(
      (value) => {
        breaker?.success();
        return toDecision(plan, value);
      },
      (error: unknown) => failed(plan, req, error, breaker),
    );
  }

  function failed(
    plan: Plan,
    req: StoreRequest,
    error: unknown,
    breaker: CircuitBreaker | undefined,
  ): Decision {
    const failure =
      error instanceof SentinelError
        ? error
        : new SentinelError(
            'STORE_FAILED',
            error instanceof Error ? error.message : String(error),
            {
              cause: error,
            },
          );
    // A store that answers, however late, is not down: only silence and failures trip the breaker.
    if (failure.code === 'STORE_BUSY') breaker?.success();
    else breaker?.failure(Date.now());
    report(failure);
    return degrade(plan, req, failure);
  }

  return {
    consume: (key, options) => request(key, options, true),
    peek: (key, options) => request(key, options, false),
    async reset(key, options) {
      const tier = options?.tier;
      const chosen = tier === undefined ? [fallback, ...plans.values()] : [planFor(tier)];
      const keys = new Set<string>();
      for (const plan of chosen) {
        if (plan === undefined)
          throw new SentinelError('UNKNOWN_TIER', `No tier named '${String(tier)}'`);
        for (const suffix of plan.keySuffixes)
          keys.add(`${prefix}:{${storageIdentity(key)}}${suffix}`);
      }
      await store.reset([...keys]);
      await local?.reset([...keys]);
    },
    async close() {
      unsubscribe?.();
      local?.close();
      if (owned) await store.close();
      // A client built from redisUrl is the limiter's own; one passed as `redis` stays open.
      if (ownClient) await toRedisConnection(ownClient).close();
    },
  };
}
