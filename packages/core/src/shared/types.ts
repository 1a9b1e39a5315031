// Public types of @sentinel/core. Internal configuration types stay in the modules that use them.
import type { SentinelError } from './errors.ts';
import { ALGORITHMS, POLICY_KINDS } from './lua-constants.generated.ts';

// The lists are generated with the scripts (scripts/generate-lua.mjs), so they cannot drift from lua/.
export { ALGORITHMS, POLICY_KINDS };

/** A rate algorithm, which a rate policy's `algorithm` names. */
export type Algorithm = (typeof ALGORITHMS)[number];
/** What a policy runs: a rate algorithm, or 'concurrency' for a concurrency policy. */
export type PolicyKind = (typeof POLICY_KINDS)[number];

/** A window: milliseconds, or a string such as `'500ms'`, `'10s'`, `'1m'`, `'1h'` or `'1d'`. */
export type Window = number | `${number}${'ms' | 's' | 'm' | 'h' | 'd'}`;

export interface PolicyOptions {
  /**
   * Names the policy in headers and in its Redis key. Letters, digits, `_`, `-` and `.`.
   * @default `<limit>-per-<window>`, prefixed with the tier's name in lower case
   */
  name?: string;
  /** Requests (units of cost) admitted per window: a positive integer. */
  limit: number;
  /** @example '1m' */
  window: Window;
  /** @default 'token-bucket' */
  algorithm?: Algorithm;
  /**
   * A penalty box: once this policy refuses a consume, the identity is refused by it for this
   * long, whatever it has left, decided in the same store call. For logins: `'15m'`.
   * @default none
   */
  blockFor?: Window;
}

/**
 * A concurrency policy: at most `concurrency` requests (units of cost) in flight at once for an
 * identity. An admitted request holds its slots until `limiter.release(decision)`, or until its
 * lease ends, so that a process that dies holding slots cannot keep them.
 */
export interface ConcurrencyPolicyOptions {
  /**
   * Names the policy in headers and in its Redis key. Letters, digits, `_`, `-` and `.`.
   * @default `<concurrency>-in-flight`, prefixed with the tier's name in lower case
   */
  name?: string;
  /** Slots (units of cost) held at once at most: a positive integer. */
  concurrency: number;
  /**
   * How long a slot is held at most unless renewed (`limiter.renew(decision)`).
   * @default '1m'
   */
  lease?: Window;
}

/** A rate policy (`PolicyOptions`) or a concurrency policy. */
export type AnyPolicyOptions = PolicyOptions | ConcurrencyPolicyOptions;

/** A tier is one policy or several; a request must satisfy all of them. */
export type TierOptions = AnyPolicyOptions | readonly AnyPolicyOptions[];

/** What to do when the store fails or is out of reach. */
export type StoreErrorMode = 'allow' | 'deny' | 'local';

/** One policy's part of a decision. */
export interface PolicyDecision {
  policy: string;
  algorithm: PolicyKind;
  allowed: boolean;
  limit: number;
  windowMs: number;
  /** Units of cost that would still be admitted now. */
  remaining: number;
  /** Milliseconds until this policy is back at its full limit. */
  resetMs: number;
  /** Milliseconds until a request of this cost would be admitted: 0 if admitted, `Infinity` if its cost exceeds the limit. */
  retryAfterMs: number;
}

export interface Decision {
  allowed: boolean;
  /** The most restrictive policy's limit, remaining and reset. */
  limit: number;
  remaining: number;
  resetMs: number;
  /** 0 when admitted; otherwise the wait until every policy admits a request of this cost. */
  retryAfterMs: number;
  /** The most restrictive policy: the one that blocks longest, or the one with the least left. */
  policy: string;
  policies: PolicyDecision[];
  tier?: string;
  /** Set when the store failed and the decision followed `onStoreError` instead. */
  degraded?: StoreErrorMode;
  /** Why it is degraded; absent while the circuit breaker skips a store known to be failing. */
  error?: SentinelError;
  /**
   * On an admitted decision whose policies include concurrency policies: the slots it holds
   * until `limiter.release(decision)`, or until the lease ends unless `limiter.renew(decision)`.
   */
  lease?: Lease;
}

/** The concurrency slots an admitted decision holds. */
export interface Lease {
  /** The concurrency policies it holds slots of, by name. */
  readonly policies: readonly string[];
  /** How long the slots are held at most, from the decision or its last renewal. */
  readonly ms: number;
  /** Slots held of each policy: the consume's cost. */
  readonly slots: number;
}

export interface ConsumeOptions {
  /** Units this request costs: a positive integer. @default 1 */
  cost?: number;
  /** Selects the tier's policies. @default the limiter's `defaultTier` */
  tier?: string;
  /**
   * This call's own policies, in place of its tier's: a tenant's contract limits, say. `tier`
   * still labels the decision. Each distinct set is checked and compiled once and kept (the last
   * 1000 sets), so a set that comes back costs what a tier does; a bad one rejects with a
   * TypeError. A policy with a `name` keeps its state when its limit changes; a new window starts
   * it afresh.
   * @example { name: 'contract', limit: 5000, window: '1m' }
   */
  policies?: TierOptions;
}

/** One evaluation, as the limiter hands it to a store. */
export interface StoreRequest {
  /** One key per policy, all under the identity's hash tag. */
  keys: readonly string[];
  policies: readonly ResolvedPolicy[];
  /** Which Lua script serves these policies. */
  script: 'mixed' | PolicyKind;
  /** The policies as script arguments: algorithm, limit, window and box for each. */
  args: readonly string[];
  cost: number;
  /** false to look without consuming. */
  apply: boolean;
  /**
   * Instead of deciding: take `cost` as a penalty whatever is left, or give `cost` back to a
   * consume charged at Unix ms `at` (only into the window it was charged in). The reply then
   * says what a peek would.
   */
  adjust?: Adjustment;
  /**
   * Take a quota lease beside this consume (see docs/leases.md): `units` more of the same
   * policies, all-or-nothing, for at most `ms`, named `id`, if they would all be admitted now;
   * the consume alone otherwise. A store that takes leases says what it took in the reply's
   * `leased`; one that takes none ignores it.
   */
  quota?: QuotaTake;
  /** Unix ms by the store's `clock`, read once for the whole decision; undefined without one. */
  now: number | undefined;
  /**
   * Called by a store that gave up on this request, failing its call so that the caller was
   * answered without it, when the reply comes after all: the request did run, and did what the
   * reply says. The limiter gives back what such a consume took. A store that never gives up
   * on a request it may still run need not call it.
   */
  late?(reply: StoreReply): void;
  /**
   * Set when the limiter traces its store calls: the caller's trace context, taken as the request
   * reached the store, and what makes the client span of the script call that serves it.
   */
  trace?: StoreTrace;
}

/** A request's place in a trace, for the store's client span around the call that serves it. */
export interface StoreTrace {
  readonly tracer: StoreTracer;
  /** The caller's context, opaque to the store. */
  readonly context: unknown;
}

/** What one script call is, for its client span. */
export interface StoreCallInfo {
  /** The Redis command: `FCALL`, or `EVALSHA` where functions cannot be used. */
  readonly operation: 'FCALL' | 'EVALSHA';
  /** The function's name: the library's, which the script also runs as under EVALSHA. */
  readonly procedure: string;
  /** `host:port` of a Cluster master; '' for a standalone server. */
  readonly server: string;
  /** Requests the call serves: more than one for a batch. */
  readonly requests: number;
}

/** Makes a client span around a store's script call; see `StoreRequest.trace`. */
export interface StoreTracer {
  /** Runs `send` in a client span: a child of the one caller, or linked to each of several. */
  span<T>(call: StoreCallInfo, contexts: readonly unknown[], send: () => Promise<T>): Promise<T>;
}

/** One policy's answer from a store. */
export interface PolicyOutcome {
  allowed: boolean;
  /** Units of cost that would still be admitted now. */
  remaining: number;
  /** Milliseconds until the policy is back at its full limit. */
  resetMs: number;
  /** 0 if admitted; `Infinity` if the cost exceeds the limit. */
  retryAfterMs: number;
}

/** A store's answer: admitted only if every policy admits, with one outcome per policy, in order. */
export interface StoreReply {
  readonly allowed: boolean;
  readonly policies: readonly PolicyOutcome[];
  /** Unix ms by the clock the store decided on: what a refund needs to find the window charged. */
  readonly at?: number;
  /** The quota lease a request's `quota` took: its units (0 for none) and ms until it ends. */
  readonly leased?: { readonly units: number; readonly ms: number };
}
/** A quota lease to take beside a consume: see StoreRequest.quota. */
export interface QuotaTake {
  readonly units: number;
  readonly ms: number;
  /** Letters and digits, unique to the lease among those of its key. */
  readonly id: string;
}

/**
 * A penalty; a refund of a consume charged at Unix ms `at`; the release of the slots that
 * consume took of its concurrency policies, alone; their renewal, as a lease from now; or the
 * end of the quota lease `id` taken at `at` and ending at `ends`, giving back `cost` unused units.
 */
export type Adjustment =
  | { readonly kind: 'penalize' }
  | { readonly kind: 'refund' | 'release' | 'renew'; readonly at: number }
  | { readonly kind: 'quota'; readonly at: number; readonly ends: number; readonly id: string };

export interface Store {
  evaluate(request: StoreRequest): StoreReply | Promise<StoreReply>;
  reset(keys: readonly string[]): void | Promise<void>;
  close(): void | Promise<void>;
  /**
   * The server that holds these keys, for a store spread over several that fail on their own,
   * such as the masters of a Redis Cluster. The limiter keeps a circuit breaker per server.
   */
  serverOf?(keys: readonly string[]): string;
  /** Calls `listener` whenever the store's connection comes (back) up; returns the unsubscribe. */
  onReady?(listener: () => void): () => void;
  /**
   * The clock the store decides on, in Unix ms, when it is not the real time: a MemoryStore's
   * `clock`, for tests. The limiter reads it once per decision, sends the reading with the
   * request, and states its own times on it. Undefined for the real time, and always for a
   * RedisStore, which decides on Redis's clock.
   */
  readonly clock?: (() => number) | undefined;
}

/** A policy after validation, as stores see it. */
export interface ResolvedPolicy {
  readonly name: string;
  readonly limit: number;
  readonly windowMs: number;
  readonly algorithm: PolicyKind;
  /** The penalty box in ms; 0 for none. Such a policy has a second key, after all state keys. */
  readonly blockForMs: number;
}
