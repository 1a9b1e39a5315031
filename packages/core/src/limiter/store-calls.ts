// The store step of a decision: the store asked through the breaker of the server that holds the
// keys, and what comes back heard: a reply, a failure answered by the failure mode, or a reply
// after the store gave up, whose admission is given back.
import { type Observers, observeDecision, type StoreHealth } from '../observe/observer.ts';
import { SentinelError } from '../shared/errors.ts';
import type { Plan } from '../shared/plan.ts';
import type { Decision, Store, StoreReply } from '../shared/types.ts';
import type { IdentityRequest, LateReplyListener } from '../stores/store-keys.ts';
import type { CircuitBreaker, CircuitBreakers } from './circuit-breaker.ts';
import { LimiterDecision, toDecision } from './decision.ts';
import type { FailureMode } from './failure-mode.ts';
import { lateReply } from './late-reply.ts';

/** What store calls share with the rest of the limiter, resolved once. */
export interface StoreCallSettings {
  readonly breakers: CircuitBreakers | undefined;
  readonly health: StoreHealth | undefined;
  readonly observers: Observers | undefined;
  readonly report: (error: SentinelError) => void;
  readonly clock: (() => number) | undefined;
}

export class StoreCalls {
  readonly #store: Store;
  readonly #settings: StoreCallSettings;
  readonly #failureMode: FailureMode;
  /** The one breaker of a store that is one server, looked up once rather than per call. */
  readonly #breaker: CircuitBreaker | undefined;
  /** Hears of replies that came after the store gave up on a call: see `lateReply`. */
  readonly #late: LateReplyListener;

  constructor(store: Store, settings: StoreCallSettings, failureMode: FailureMode) {
    this.#store = store;
    this.#settings = settings;
    this.#failureMode = failureMode;
    this.#breaker = store.serverOf === undefined ? settings.breakers?.of('') : undefined;
    const late = { ...settings, store };
    this.#late = (request, reply) =>
      lateReply(late, request, reply, (refund) => this.adjust(refund, false));
  }

  /**
   * A consume or a peek, decided by the store unless the breaker of the server holding the keys
   * is open; by the failure mode when it is, or when the store fails. Observers hear of each
   * decision, with the store's time when it answered.
   */
  decide(plan: Plan, request: IdentityRequest): Promise<Decision> {
    const breaker = this.#breakerOf(request);
    const sentAt = Date.now();
    request.sentAt = sentAt;
    if (breaker && !breaker.allow(sentAt)) return Promise.resolve(this.#degrade(plan, request));
    request.lateListener = this.#late;
    // Timed only for observers: performance.now() is a cost the unobserved path does not pay.
    const startedAt = this.#settings.observers?.decision && performance.now();
    let reply: StoreReply | Promise<StoreReply>;
    try {
      reply = this.#store.evaluate(request);
    } catch (error) {
      return Promise.resolve(this.#failed(plan, request, error, breaker));
    }
    // The memory store answers synchronously: no promise to wait on.
    if (!(reply instanceof Promise)) {
      return Promise.resolve(this.#answered(plan, request, breaker, startedAt, reply));
    }
    return reply.then(
      (value) => this.#answered(plan, request, breaker, startedAt, value),
      (error: unknown) => this.#failed(plan, request, error, breaker),
    );
  }

  /**
   * Sends a penalty or a refund: through the breaker (`gated`), failing with a SentinelError,
   * never degraded. A refund of a consume admitted late neither waits for the breaker nor moves
   * it: the server it goes to has just answered, an open breaker would leave the consume's cost
   * taken for good, and the breaker's cool-down is for the decisions, which it keeps off a
   * failing server.
   */
  async adjust(request: IdentityRequest, gated = true): Promise<StoreReply> {
    const breaker = gated ? this.#breakerOf(request) : undefined;
    request.sentAt = Date.now();
    request.lateListener = this.#late;
    if (breaker && !breaker.allow(request.sentAt)) {
      throw new SentinelError(
        'STORE_UNAVAILABLE',
        'The circuit breaker is open: the store is failing',
      );
    }
    try {
      const reply = await this.#store.evaluate(request);
      breaker?.success();
      const { health } = this.#settings;
      if (health?.anyDown) health.answered(this.#serverOf(request));
      return reply;
    } catch (error) {
      throw this.#storeFailed(request, error, breaker);
    }
  }

  #breakerOf(request: IdentityRequest): CircuitBreaker | undefined {
    return this.#breaker ?? this.#settings.breakers?.of(this.#serverOf(request));
  }

  /** The server holding a request's keys: '' for a store that is one server. */
  #serverOf(request: IdentityRequest): string {
    return this.#store.serverOf?.(request.keys) ?? '';
  }

  /** A reply from the store: the breaker and the health hear of it, and observers of its time. */
  #answered(
    plan: Plan,
    request: IdentityRequest,
    breaker: CircuitBreaker | undefined,
    startedAt: number | undefined,
    reply: StoreReply,
  ): Decision {
    breaker?.success();
    const { health, observers } = this.#settings;
    if (health?.anyDown) health.answered(this.#serverOf(request));
    const decision = toDecision(plan, reply);
    if (request.apply && decision.allowed) {
      // The request is the charge: its keys, policies and cost, and when the store charged it.
      request.chargedAt = reply.at;
      request.left = request.cost;
      LimiterDecision.keep(decision, request);
      if (plan.lease !== undefined && reply.at !== undefined) {
        decision.lease = request.cost === 1 ? plan.lease : { ...plan.lease, slots: request.cost };
        request.holds = true;
      }
    }
    if (startedAt === undefined) return decision;
    const storeMs = performance.now() - startedAt;
    return observeDecision(observers, decision, request.identity, request.apply, storeMs);
  }

  #failed(
    plan: Plan,
    request: IdentityRequest,
    error: unknown,
    breaker: CircuitBreaker | undefined,
  ): Decision {
    const failure = this.#storeFailed(request, error, breaker);
    this.#settings.report(failure);
    return this.#degrade(plan, request, failure);
  }

  /** A store call that failed: the breaker, the health and the observers hear of it. */
  #storeFailed(
    request: IdentityRequest,
    error: unknown,
    breaker: CircuitBreaker | undefined,
  ): SentinelError {
    const failure = asSentinelError(error);
    // A store that answers, however late, is not down: only silence and failures trip the breaker.
    if (failure.code === 'STORE_BUSY') breaker?.success();
    else breaker?.failure(Date.now());
    const { health, observers } = this.#settings;
    if (health || observers?.storeError) {
      const server = this.#serverOf(request);
      health?.failed(server, failure);
      observers?.storeError?.({ server, error: failure });
    }
    return failure;
  }

  #degrade(plan: Plan, request: IdentityRequest, error?: SentinelError): Decision {
    const decision = this.#failureMode.decide(plan, request, error);
    const { observers } = this.#settings;
    return observeDecision(observers, decision, request.identity, request.apply, undefined);
  }
}

function asSentinelError(error: unknown): SentinelError {
  return error instanceof SentinelError
    ? error
    : new SentinelError('STORE_FAILED', error instanceof Error ? error.message : String(error), {
        cause: error,
      });
}
