// The store step of a decision: the store asked through the breaker of the server that holds the
// keys, and what comes back heard: a reply, a failure answered by the failure mode, or a reply
// after the store gave up, whose admission is given back.
import { type Observers, observeDecision, type StoreHealth } from '../observe/observer.ts';
import type { Telemetry } from '../observe/opentelemetry.ts';
import { SentinelError } from '../shared/errors.ts';
import type { Plan } from '../shared/plan.ts';
import type { Decision, Store, StoreReply } from '../shared/types.ts';
import { IdentityRequest, JointLayout, type LateReplyListener } from '../stores/store-keys.ts';
import type { CircuitBreaker, CircuitBreakers } from './circuit-breaker.ts';
import { LimiterDecision, toDecision } from './decision.ts';
import type { FailureMode } from './failure-mode.ts';
import { lateReply } from './late-reply.ts';
import { joinPlans } from './policy.ts';

/** What store calls share with the rest of the limiter, resolved once. */
export interface StoreCallSettings {
  readonly breakers: CircuitBreakers | undefined;
  readonly health: StoreHealth | undefined;
  readonly observers: Observers | undefined;
  readonly report: (error: SentinelError) => void;
  readonly clock: (() => number) | undefined;
  /** Traces store calls when OpenTelemetry is on. */
  readonly telemetry: Telemetry | undefined;
}

/** A consume made ready to send, and the store calls of the limiter it is for. */
export interface Leg {
  readonly request: IdentityRequest;
  readonly calls: StoreCalls;
}

/** What a consume sent behind another limiter's came to: see `StoreCalls.decideBeside`. */
export interface BesideDecisions {
  /** The decision of the consume sent ahead. */
  readonly lead: Decision;
  /** This limiter's, unless the lead refused: its policies were then never asked. */
  readonly own: Decision | undefined;
}

/** The plans of calls made beside another, by the lead's plan and then the own: built once. */
const joinedPlans = new WeakMap<Plan, WeakMap<Plan, Plan>>();

function joinedPlan(lead: Plan, own: Plan): Plan {
  let byOwn = joinedPlans.get(lead);
  if (byOwn === undefined) {
    byOwn = new WeakMap();
    joinedPlans.set(lead, byOwn);
  }
  let plan = byOwn.get(own);
  if (plan === undefined) {
    plan = joinPlans(lead, own);
    byOwn.set(own, plan);
  }
  return plan;
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
    if (this.#settings.telemetry) request.trace = this.#settings.telemetry.traceHere();
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
   * A consume of this limiter's sent behind `lead`, one of another limiter's over the same data
   * (the fleet's count of `shed`, say), in one script call: all or nothing, so that neither
   * takes anything unless both admit. Each decision is made, observed and kept for its release
   * as its own limiter would; this one's is left out when the lead refused, since a request
   * refused ahead of its policies is not theirs to count. Undefined when the two cannot go
   * together, and each must then be sent alone: keys on more than one server (a Cluster), costs
   * that differ, or a breaker that is open and must see the calls one by one.
   */
  decideBeside(lead: Leg, own: IdentityRequest): Promise<BesideDecisions> | undefined {
    const first = lead.request;
    if (first.cost !== own.cost || (this.#store.serverOf?.(own.keys) ?? '') !== '') {
      return undefined;
    }
    const leadBreaker = lead.calls.#breakerOf(first);
    const ownBreaker = this.#breakerOf(own);
    if (leadBreaker?.open === true || ownBreaker?.open === true) return undefined;
    const leadPlan = first.layout.plan;
    const ownPlan = own.layout.plan;
    const plan = joinedPlan(leadPlan, ownPlan);
    const perPolicy = (request: IdentityRequest, value: string) =>
      request.layout.plan.policies.map(() => value);
    const layout = new JointLayout(
      [...perPolicy(first, first.layout.prefix), ...perPolicy(own, own.layout.prefix)],
      plan,
      [...perPolicy(first, first.identity), ...perPolicy(own, own.identity)],
    );
    // Spaces appear in no stored identity: the two name the call unambiguously.
    const identity = `${first.identity} ${own.identity}`;
    const request = new IdentityRequest(identity, layout, own.cost, true, own.now);
    const sentAt = Date.now();
    request.sentAt = first.sentAt = own.sentAt = sentAt;
    // Admitted after the store gave up on it, it is given back whole, as a joint consume is.
    request.lateListener = this.#late;
    if (this.#settings.telemetry) request.trace = this.#settings.telemetry.traceHere();
    const startedAt = this.#settings.observers?.decision && performance.now();
    const answered = (reply: StoreReply): BesideDecisions => {
      leadBreaker?.success();
      ownBreaker?.success();
      for (const { health } of [lead.calls.#settings, this.#settings]) {
        if (health?.anyDown) health.answered('');
      }
      const storeMs = startedAt === undefined ? undefined : performance.now() - startedAt;
      const count = leadPlan.policies.length;
      const leadPart = reply.policies.slice(0, count);
      const leadAdmits = leadPart.every((outcome) => outcome.allowed);
      const part = (allowed: boolean, policies: StoreReply['policies']): StoreReply =>
        reply.at === undefined ? { allowed, policies } : { allowed, policies, at: reply.at };
      const leadDecision = lead.calls.#decided(
        leadPlan,
        first,
        part(leadAdmits, leadPart),
        reply.allowed,
        storeMs,
      );
      if (!leadAdmits) return { lead: leadDecision, own: undefined };
      const ownPart = part(reply.allowed, reply.policies.slice(count));
      const ownDecision = this.#decided(ownPlan, own, ownPart, reply.allowed, storeMs);
      return { lead: leadDecision, own: ownDecision };
    };
    const failed = (error: unknown): BesideDecisions => {
      const leadDecision = lead.calls.#failed(leadPlan, first, error, leadBreaker);
      const ownDecision = leadDecision.allowed
        ? this.#failed(ownPlan, own, error, ownBreaker)
        : undefined;
      return { lead: leadDecision, own: ownDecision };
    };
    let reply: StoreReply | Promise<StoreReply>;
    try {
      reply = this.#store.evaluate(request);
    } catch (error) {
      return Promise.resolve(failed(error));
    }
    if (!(reply instanceof Promise)) return Promise.resolve(answered(reply));
    return reply.then(answered, failed);
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
    if (this.#settings.telemetry) request.trace = this.#settings.telemetry.traceHere();
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
    const { health } = this.#settings;
    if (health?.anyDown) health.answered(this.#serverOf(request));
    const storeMs = startedAt === undefined ? undefined : performance.now() - startedAt;
    return this.#decided(plan, request, reply, reply.allowed, storeMs);
  }

  /**
   * The decision a reply makes, kept for a refund and holding its slots when the store `charged`
   * it, and told to observers when they listen.
   */
  #decided(
    plan: Plan,
    request: IdentityRequest,
    reply: StoreReply,
    charged: boolean,
    storeMs: number | undefined,
  ): Decision {
    const decision = toDecision(plan, reply);
    if (reply.leased !== undefined) request.leased = reply.leased;
    if (request.apply && charged) {
      // The request is the charge: its keys, policies and cost, and when the store charged it.
      request.chargedAt = reply.at;
      request.left = request.cost;
      LimiterDecision.keep(decision, request);
      if (plan.lease !== undefined && reply.at !== undefined) {
        decision.lease = request.cost === 1 ? plan.lease : { ...plan.lease, slots: request.cost };
        request.holds = true;
      }
    }
    const { observers } = this.#settings;
    if (observers === undefined) return decision;
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
