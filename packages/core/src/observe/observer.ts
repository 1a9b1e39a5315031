// What a limiter tells the outside: every decision, store failure, store and breaker transition,
// and every consume given back because its admission came after the store gave up on it.
// Metrics, logs and tracing are built on this; a limiter without observers pays one check per call.
import type { SentinelError } from '../shared/errors.ts';
import type { Decision } from '../shared/types.ts';
import { checkFunction, checkObject, describe, fail } from '../shared/validation.ts';

export interface DecisionEvent {
  readonly decision: Decision;
  /** The identity as store keys carry it: the key as written, or its fingerprint. */
  readonly identity: string;
  /** true for `consume`, false for `peek`. */
  readonly consumed: boolean;
  /** `degraded` whenever the failure mode decided, whether it admitted or refused. */
  readonly outcome: 'allowed' | 'limited' | 'degraded';
  /**
   * Milliseconds the store took to answer; undefined when no store answered: the failure mode,
   * the breaker or the block cache decided.
   */
  readonly storeMs: number | undefined;
}

/** Tells the observers of a decision, where any listen; returns the decision. */
export function observeDecision(
  observers: Observers | undefined,
  decision: Decision,
  identity: string,
  consumed: boolean,
  storeMs: number | undefined,
): Decision {
  // A count needs neither the event nor the store's time, which the path then skips.
  observers?.count?.(decision);
  const observe = observers?.decision;
  if (observe === undefined) return decision;
  const outcome =
    decision.degraded !== undefined ? 'degraded' : decision.allowed ? 'allowed' : 'limited';
  observe({ decision, identity, consumed, outcome, storeMs });
  return decision;
}

export interface StoreErrorEvent {
  /** The server that failed: `host:port` of a Cluster master, '' for a single server. */
  readonly server: string;
  readonly error: SentinelError;
}

/** A server of the store going down (its first failure) or coming back (its first answer after). */
export interface StoreStateEvent {
  readonly server: string;
  readonly state: 'down' | 'up';
  /** The failure that took it down. */
  readonly error?: SentinelError;
}

export interface BreakerEvent {
  readonly server: string;
  /** `open`: calls skip the server for the cool-down; `closed`: a call reached it again. */
  readonly state: 'open' | 'closed';
}

/**
 * A consume the store gave up on, whose caller was answered by `onStoreError`, that Redis had run
 * and admitted all the same: its reply came after the deadline. Its cost is given back to every
 * policy it was charged to, into the windows it was charged in, as `refund()` gives it back.
 */
export interface LateRefundEvent {
  /** The identity as store keys carry it: the key as written, or its fingerprint. */
  readonly identity: string;
  /** The consume's tier; undefined for a limiter without tiers. */
  readonly tier: string | undefined;
  /** Units given back to each policy: the consume's cost. */
  readonly cost: number;
  /** The server that ran it: `host:port` of a Cluster master, '' for a single server. */
  readonly server: string;
  /**
   * Why nothing could be given back, when the refund failed: the cost then stays taken. The
   * error also reaches `onError`.
   */
  readonly error: SentinelError | undefined;
}

/** Concurrency slots given back by `release()`, or found free already: their lease had ended. */
export interface ReleaseEvent {
  /** The identity as store keys carry it: the key as written, or its fingerprint. */
  readonly identity: string;
  /** The consume's tier; undefined for a limiter without tiers. */
  readonly tier: string | undefined;
  /** The concurrency policies whose slots it held, by name. */
  readonly policies: readonly string[];
  /** Slots of each policy: the consume's cost. */
  readonly slots: number;
  /**
   * true when the lease had ended before the release: its process was slower than the lease,
   * or its slots were renewed too late, and others may have had them meanwhile. false too when
   * the release failed: the slots then lapse with their lease.
   */
  readonly lapsed: boolean;
}

/** Each hook is optional. What a hook throws becomes a process warning, never a failed request. */
export interface Observer {
  /** Every consume and peek, once decided. */
  decision?(event: DecisionEvent): void;
  /** Every store failure, as `onError` sees it, with the server. */
  storeError?(event: StoreErrorEvent): void;
  /** Once per transition of a server, not once per failure. */
  store?(event: StoreStateEvent): void;
  /** Once per transition of a server's circuit breaker. */
  breaker?(event: BreakerEvent): void;
  /** Once per consume admitted after the store gave up on it, when its refund is done or failed. */
  lateRefund?(event: LateRefundEvent): void;
  /** Once per release of a decision's concurrency slots, once the store answered or failed. */
  release?(event: ReleaseEvent): void;
}

/** The methods Sentinel calls on a `logger`, in pino's `(object, message)` form. */
export interface Logger {
  info(object: object, message: string): void;
  warn(object: object, message: string): void;
}

/** The observers' hooks, each merged into one function, or undefined when nobody listens. */
export interface Observers {
  readonly decision: ((event: DecisionEvent) => void) | undefined;
  /** Counts each decision, with no event or timing: OpenTelemetry's metrics. */
  readonly count: ((decision: Decision) => void) | undefined;
  readonly storeError: ((event: StoreErrorEvent) => void) | undefined;
  readonly store: ((event: StoreStateEvent) => void) | undefined;
  readonly breaker: ((event: BreakerEvent) => void) | undefined;
  readonly lateRefund: ((event: LateRefundEvent) => void) | undefined;
  readonly release: ((event: ReleaseEvent) => void) | undefined;
}

const HOOKS = [
  'decision',
  'storeError',
  'store',
  'breaker',
  'lateRefund',
  'release',
] as const satisfies readonly (keyof Observer)[];

/**
 * Checks `observe` and `logger` once, and merges them; the logger and OpenTelemetry's metrics are
 * observers too.
 */
export function resolveObservers(
  observe: Observer | readonly Observer[] | undefined,
  logger: Logger | undefined,
  telemetry?: { readonly observer: Observer; count(decision: Decision): void },
): Observers | undefined {
  const list: Observer[] = [];
  if (observe !== undefined) {
    const given = Array.isArray(observe) ? observe : [observe as Observer];
    given.forEach((observer, i) => {
      const name = Array.isArray(observe) ? `observe[${i}]` : 'observe';
      checkObject(observer, name, `an object with hooks such as { decision(event) {} }`);
      for (const field of Object.keys(observer)) {
        if (!(HOOKS as readonly string[]).includes(field)) {
          fail(`${name}.${field}`, `is not a hook; the hooks are ${HOOKS.join(', ')}`);
        }
        checkFunction((observer as Observer)[field as keyof Observer], `${name}.${field}`);
      }
      list.push(observer);
    });
  }
  if (logger !== undefined) list.push(loggingObserver(checkLogger(logger)));
  if (telemetry !== undefined) list.push(telemetry.observer);
  if (list.length === 0) return undefined;
  return {
    decision: merge(list, 'decision'),
    count: telemetry && ((decision) => telemetry.count(decision)),
    storeError: merge(list, 'storeError'),
    store: merge(list, 'store'),
    breaker: merge(list, 'breaker'),
    lateRefund: merge(list, 'lateRefund'),
    release: merge(list, 'release'),
  };
}

function checkLogger(logger: unknown): Logger {
  checkObject(logger, 'logger', 'a pino-compatible logger with info() and warn()');
  for (const method of ['info', 'warn'] as const) {
    const value = (logger as Record<string, unknown>)[method];
    if (typeof value !== 'function') {
      fail(`logger.${method}`, `must be a function, as a pino logger has, got ${describe(value)}`);
    }
  }
  return logger as Logger;
}

function merge<K extends keyof Observer>(
  list: readonly Observer[],
  hook: K,
): Observers[K] | undefined {
  const hooks = list.filter((o) => o[hook] !== undefined);
  if (hooks.length === 0) return undefined;
  return ((event: never) => {
    for (const observer of hooks) {
      try {
        (observer[hook] as (event: never) => void).call(observer, event);
      } catch (thrown) {
        // An observer watches requests; it must not fail them.
        process.emitWarning(
          `@sentinel/core: observe.${hook} threw: ${thrown instanceof Error ? thrown.message : String(thrown)}`,
          'SentinelWarning',
        );
      }
    }
  }) as Observers[K];
}

/** Logs transitions only: one line when a server goes down or comes back, or a breaker turns. */
function loggingObserver(logger: Logger): Observer {
  const where = (server: string) => (server === '' ? {} : { server });
  return {
    store({ server, state, error }) {
      if (state === 'down') {
        logger.warn(
          { ...where(server), err: error },
          `Sentinel: the store is failing (${error?.code}): decisions follow onStoreError until it answers`,
        );
      } else {
        logger.info(where(server), 'Sentinel: the store answers again');
      }
    },
    breaker({ server, state }) {
      if (state === 'open') {
        logger.warn(where(server), 'Sentinel: circuit breaker open: calls skip the store');
      } else {
        logger.info(where(server), 'Sentinel: circuit breaker closed: calls reach the store');
      }
    },
  };
}

/**
 * Which servers are down, for the `store` transitions. A server is down from a failure that
 * says it is out of reach or broken until it answers again; an answer that only came late
 * (STORE_BUSY) shows it alive.
 */
export class StoreHealth {
  readonly #emit: (event: StoreStateEvent) => void;
  readonly #down = new Set<string>();

  constructor(emit: (event: StoreStateEvent) => void) {
    this.#emit = emit;
  }

  /** Whether any server is down: while none is, answers need no server name. */
  get anyDown(): boolean {
    return this.#down.size > 0;
  }

  failed(server: string, error: SentinelError): void {
    if (error.code === 'STORE_BUSY') {
      this.answered(server);
    } else if (!this.#down.has(server)) {
      this.#down.add(server);
      this.#emit({ server, state: 'down', error });
    }
  }

  answered(server: string): void {
    if (this.#down.delete(server)) this.#emit({ server, state: 'up' });
  }
}
