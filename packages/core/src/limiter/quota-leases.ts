// Quota leases: a hot key's budget taken into this process a share at a time, each share a debit
// the store granted in one atomic call, and spent here without a round trip. The fleet admits at
// most what the store granted, so a limit still holds exactly (see docs/leases.md).
import type { Plan } from '../shared/plan.ts';
import type { Decision, PolicyOutcome, QuotaTake, StoreReply, Window } from '../shared/types.ts';
import { checkObject, describe, fail, rejectUnknownFields } from '../shared/validation.ts';
import { parseWindow } from '../shared/window.ts';
import { IdentityRequest, type KeyLayout } from '../stores/store-keys.ts';
import { LimiterDecision, toDecision } from './decision.ts';

export interface QuotaLeaseOptions {
  /**
   * How long a lease lasts at most. Its unspent units go back when it ends; a process that dies
   * holding one strands them until then (and a fixed window's until the window ends, if sooner).
   * @default '1s'
   */
  duration?: Window;
  /**
   * Units of cost one key must be asked for in this process within one `duration` before it
   * takes leases: a colder key never waits for one, and decides in the store as ever.
   * @default 32
   */
  hotAt?: number;
  /**
   * The most of what a key has left in the store that one lease takes, so that one process
   * cannot strand the budget while others starve: a fraction in (0, 1].
   * @default 0.25
   */
  share?: number;
}

const FIELDS = ['duration', 'hotAt', 'share'] as const;

/** A lease smaller than this is not worth its two calls: near the budget's end, none is taken. */
export const MIN_LEASE_UNITS = 4;

/**
 * Ms a lease's holder stops before the end the store stated: the store read its clock after this
 * process sent the call, in whole ms, so the lease ends no sooner than the send plus its ms, less
 * one; and a margin for timers.
 */
const LEASE_END_MARGIN_MS = 2;

/** How long before its end a lease nobody spends to the end is given back. */
const RETURN_LEAD_MS = 50;

export interface QuotaLeaseSettings {
  readonly durationMs: number;
  readonly hotAt: number;
  readonly share: number;
}

/** `quotaLeases` checked: undefined when off. A bad value throws a TypeError naming it. */
export function resolveQuotaLeases(
  value: boolean | QuotaLeaseOptions | undefined,
): QuotaLeaseSettings | undefined {
  if (value === undefined || value === false) return undefined;
  const options: QuotaLeaseOptions = value === true ? {} : value;
  if (value !== true) {
    checkObject(value, 'quotaLeases', 'true, or { duration, hotAt, share }');
    rejectUnknownFields(value, FIELDS, 'quotaLeases');
  }
  const { duration = '1s', hotAt = 32, share = 0.25 } = options;
  const durationMs = parseWindow(duration);
  if (durationMs === undefined) {
    fail(
      'quotaLeases.duration',
      `must be positive whole milliseconds or a string like '500ms' or '2s', got ${describe(duration)}`,
    );
  }
  if (!Number.isSafeInteger(hotAt) || hotAt < 1) {
    fail('quotaLeases.hotAt', `must be a positive integer, got ${describe(hotAt)}`);
  }
  if (typeof share !== 'number' || !(share > 0 && share <= 1)) {
    fail('quotaLeases.share', `must be a number above 0 and at most 1, got ${describe(share)}`);
  }
  return { durationMs, hotAt, share };
}

/** One lease this process holds: its units left and its end, and the sync that granted it. */
class QuotaLease {
  ended = false;
  /**
   * The outcomes each spend's decision is made from, filled anew each time: toDecision copies
   * what it reads, so one set serves every spend without three objects more per request.
   */
  readonly #outcomes: PolicyOutcome[];
  readonly #reply: StoreReply;

  constructor(
    readonly plan: Plan,
    readonly identity: string,
    readonly layout: KeyLayout,
    readonly id: string,
    /** Units not spent yet. */
    public left: number,
    /** By the leases' clock: spending stops before it. */
    readonly deadline: number,
    /** Unix ms by the store's clock: when it was granted, and when the store ends it. */
    readonly at: number,
    readonly ends: number,
    /** What the store said each policy had left, besides this lease, and when. */
    readonly synced: readonly PolicyOutcome[],
    readonly syncedAt: number,
  ) {
    this.#outcomes = synced.map(() => ({
      allowed: true,
      remaining: 0,
      resetMs: 0,
      retryAfterMs: 0,
    }));
    this.#reply = { allowed: true, policies: this.#outcomes };
  }

  /**
   * The decision of a request spent from the lease: each policy shows what it had left at the
   * sync, which other processes may have spent since, plus what the lease still holds, and so
   * never more than the fleet had then.
   */
  decision(now: number): Decision {
    const elapsed = now - this.syncedAt;
    const { policies } = this.plan;
    for (let i = 0; i < policies.length; i++) {
      const synced = this.synced[i] as PolicyOutcome;
      const outcome = this.#outcomes[i] as PolicyOutcome;
      outcome.remaining = Math.min(
        (policies[i] as Plan['policies'][number]).limit,
        synced.remaining + this.left,
      );
      outcome.resetMs = Math.max(0, synced.resetMs - elapsed);
    }
    return toDecision(this.plan, this.#reply);
  }
}

/** What a decision spent from a lease: a refund gives it back to the lease while it lasts. */
export class QuotaCharge {
  constructor(
    private readonly lease: QuotaLease,
    public left: number,
  ) {}

  get identity(): string {
    return this.lease.identity;
  }

  /** Gives `amount` (by default all) back to the lease; false once the lease has ended. */
  refund(amount: number | undefined): boolean {
    if (this.left === 0 || this.lease.ended) return false;
    const given = Math.min(amount ?? this.left, this.left);
    this.left -= given;
    this.lease.left += given;
    return true;
  }
}

/** A key's demand in this process, this period and the last, and its lease. */
export class Heat {
  /** Units asked for this period, and the period before. */
  seen = 0;
  before = 0;
  /**
   * What the store last said the key had left (its most restrictive policy's), and when, by the
   * leases' clock, it said every policy would be back at its full limit.
   */
  remaining = 0;
  fullAt = Number.POSITIVE_INFINITY;
  limit = 0;
  lease: QuotaLease | undefined = undefined;
  /** The call taking a lease, while it is under way: one at a time, which others wait for. */
  taking: Promise<unknown> | undefined = undefined;
}

/** How a lease's end reaches the store: the limiter's adjustment call, tracked for `close()`. */
export type SendQuotaReturn = (request: IdentityRequest) => Promise<unknown>;

/**
 * The leases of one limiter, and the demand that decides when to take them and how large. Keys
 * are counted per period of one lease's duration, in two maps of which the older is dropped each
 * period, so a key not asked for in two periods is forgotten and its lease given back.
 */
export class QuotaLeases {
  readonly #settings: QuotaLeaseSettings;
  readonly #now: () => number;
  /** The store's clock where a test gave it one, which each call carries. */
  readonly #storeClock: (() => number) | undefined;
  readonly #send: SendQuotaReturn;
  readonly #recordsLeases = new WeakMap<Plan, boolean>();
  readonly #idPrefix = Math.floor(Math.random() * 36 ** 8).toString(36);
  #sequence = 0;
  /** The keys holding a lease, and the timer that ends leases nobody spends to their end. */
  readonly #live = new Set<Heat>();
  readonly #returnLeadMs: number;
  #timer: ReturnType<typeof setTimeout> | undefined = undefined;
  #timerAt = Number.POSITIVE_INFINITY;
  #current = new Map<Plan, Map<string, Heat>>();
  #previous = new Map<Plan, Map<string, Heat>>();
  #periodEnds: number;

  constructor(
    settings: QuotaLeaseSettings,
    storeClock: (() => number) | undefined,
    send: SendQuotaReturn,
  ) {
    this.#settings = settings;
    this.#storeClock = storeClock;
    // Long enough for the return to reach Redis before the lease ends there; a tenth of a short lease.
    this.#returnLeadMs = Math.min(RETURN_LEAD_MS, settings.durationMs / 10);
    // Read once: Node's global `performance` is a getter, which optimized code would call on
    // every spend.
    const monotonic = performance;
    this.#now = storeClock ?? (() => monotonic.now());
    const now = this.#now;
    this.#send = send;
    this.#periodEnds = now() + settings.durationMs;
  }

  /** The clock deadlines are stated on. */
  now(): number {
    return this.#now();
  }

  /** The key's demand, with `cost` more asked for now. */
  heatOf(plan: Plan, identity: string, cost: number, now: number): Heat {
    if (now >= this.#periodEnds) this.#rotate(now);
    let byIdentity = this.#current.get(plan);
    if (byIdentity === undefined) {
      byIdentity = new Map();
      this.#current.set(plan, byIdentity);
    }
    let heat = byIdentity.get(identity);
    if (heat === undefined) {
      const earlier = this.#previous.get(plan);
      heat = earlier?.get(identity);
      if (heat === undefined) {
        heat = new Heat();
      } else {
        earlier?.delete(identity);
        heat.before = heat.seen;
        heat.seen = 0;
      }
      byIdentity.set(identity, heat);
    }
    heat.seen += cost;
    return heat;
  }

  /**
   * A request of `cost` decided from the key's lease, if it holds enough and has not ended; a
   * lease that is spent or past its end is ended here, and the request goes to the store.
   */
  spend(heat: Heat, cost: number, now: number): Decision | undefined {
    const lease = heat.lease;
    if (lease === undefined) return undefined;
    if (lease.left >= cost && now < lease.deadline) {
      lease.left -= cost;
      const decision = lease.decision(now);
      LimiterDecision.keep(decision, new QuotaCharge(lease, cost));
      return decision;
    }
    this.#end(heat, lease);
    return undefined;
  }

  /**
   * The lease to take beside a consume the store decides, sized to the key's demand over one
   * duration and at most `share` of what it has left; none for a key below `hotAt`, while a take
   * is under way, or when that is under MIN_LEASE_UNITS.
   */
  take(heat: Heat, now: number): QuotaTake | undefined {
    if (heat.taking !== undefined || heat.lease !== undefined) return undefined;
    const { hotAt, share, durationMs } = this.#settings;
    const demand = Math.max(heat.seen, heat.before);
    if (demand < hotAt) return undefined;
    // A key last seen spent may have refilled since: once the store's reset has passed, it is full.
    const left = now >= heat.fullAt ? heat.limit : heat.remaining;
    const units = Math.min(demand, Math.floor(left * share));
    if (units < MIN_LEASE_UNITS) return undefined;
    return { units, ms: durationMs, id: `${this.#idPrefix}${(this.#sequence++).toString(36)}` };
  }

  /**
   * Hears the store's decision of a consume: what the key has left, and the lease it took, if
   * any, which its decision shows among what is left. `sentAt` is when it was sent, by `now`.
   */
  settle(heat: Heat, request: IdentityRequest, decision: Decision, sentAt: number): Decision {
    if (request.quota !== undefined) heat.taking = undefined;
    if (decision.degraded !== undefined) return decision;
    heat.remaining = decision.remaining;
    heat.limit = decision.limit;
    let resetMs = 0;
    for (const policy of decision.policies) resetMs = Math.max(resetMs, policy.resetMs);
    heat.fullAt = sentAt + resetMs;
    const leased = request.leased;
    if (leased === undefined || leased.units === 0 || !decision.allowed) return decision;
    const at = request.chargedAt;
    if (at === undefined) return decision;
    const { plan } = request.layout;
    const synced = decision.policies.map(
      (p): PolicyOutcome => ({
        allowed: true,
        remaining: p.remaining,
        resetMs: p.resetMs,
        retryAfterMs: 0,
      }),
    );
    const lease = new QuotaLease(
      plan,
      request.identity,
      request.layout,
      (request.quota as QuotaTake).id,
      leased.units,
      sentAt + leased.ms - LEASE_END_MARGIN_MS,
      at,
      at + leased.ms,
      synced,
      sentAt,
    );
    const old = heat.lease;
    if (old !== undefined) this.#end(heat, old);
    heat.lease = lease;
    this.#live.add(heat);
    this.#wakeBy(lease.deadline);
    // The request that took it shows the lease's units among what is left, as the next will.
    for (const policy of decision.policies) {
      policy.remaining = Math.min(policy.limit, policy.remaining + leased.units);
    }
    decision.remaining = Math.min(decision.limit, decision.remaining + leased.units);
    return decision;
  }

  /** Ends every lease, giving back what is unspent; resolves once the store has heard. */
  close(): Promise<unknown> {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    const ending: Promise<unknown>[] = [];
    for (const generation of [this.#previous, this.#current]) {
      for (const byIdentity of generation.values()) {
        for (const heat of byIdentity.values()) {
          if (heat.lease !== undefined) ending.push(this.#end(heat, heat.lease));
        }
      }
    }
    this.#previous = new Map();
    this.#current = new Map();
    return Promise.allSettled(ending);
  }

  /**
   * Wakes up `returnLeadMs` before `deadline`, or sooner if it must for another lease: a lease
   * nobody spends to its end is ended then, while Redis still holds it, so that its unspent units
   * go back rather than lapse. Only on the real clock: a test's clock moves by hand.
   */
  #wakeBy(deadline: number): void {
    if (this.#storeClock !== undefined) return;
    const at = deadline - this.#returnLeadMs;
    if (this.#timer !== undefined && this.#timerAt <= at) return;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timerAt = at;
    this.#timer = setTimeout(() => this.#wake(), Math.max(0, at - this.#now()));
    this.#timer.unref?.();
  }

  /** Ends the leases within `returnLeadMs` of their end, and sleeps until the next one is. */
  #wake(): void {
    this.#timer = undefined;
    const now = this.#now();
    let next = Number.POSITIVE_INFINITY;
    for (const heat of this.#live) {
      const lease = heat.lease;
      if (lease === undefined) continue;
      if (lease.deadline - this.#returnLeadMs <= now) this.#end(heat, lease);
      else next = Math.min(next, lease.deadline);
    }
    if (next !== Number.POSITIVE_INFINITY) this.#wakeBy(next);
  }

  /** A new period: keys not asked for in the last two are forgotten, their leases given back. */
  #rotate(now: number): void {
    const forgotten = this.#previous;
    this.#previous = this.#current;
    this.#current = new Map();
    this.#periodEnds = now + this.#settings.durationMs;
    for (const byIdentity of forgotten.values()) {
      for (const heat of byIdentity.values()) {
        if (heat.lease !== undefined) this.#end(heat, heat.lease);
      }
    }
  }

  /**
   * Ends a lease here, and in the store when it holds something to give back: unspent units, or
   * a bucket's record of the lease, which keeps its units from refilling until then.
   */
  #end(heat: Heat, lease: QuotaLease): Promise<unknown> {
    if (heat.lease === lease) {
      heat.lease = undefined;
      this.#live.delete(heat);
    }
    if (lease.ended) return Promise.resolve();
    lease.ended = true;
    const unused = lease.left;
    lease.left = 0;
    if (unused === 0 && !this.#records(lease.plan)) return Promise.resolve();
    const request = new IdentityRequest(
      lease.identity,
      lease.layout,
      unused,
      false,
      this.#storeClock?.(),
    );
    request.adjust = { kind: 'quota', at: lease.at, ends: lease.ends, id: lease.id };
    // A return that fails leaves the units to lapse at the lease's end: under-admission only.
    return this.#send(request).catch(() => undefined);
  }

  /** Whether the plan has a policy whose state records its leases (token bucket, GCRA). */
  #records(plan: Plan): boolean {
    let records = this.#recordsLeases.get(plan);
    if (records === undefined) {
      records = plan.policies.some((p) => p.algorithm === 'token-bucket' || p.algorithm === 'gcra');
      this.#recordsLeases.set(plan, records);
    }
    return records;
  }
}
