// One request's check: what it counts as, the limiter's decision on it, and the verdict.
import { type Limiter, legsOf } from '../limiter/limiter.ts';
import type { ConsumeOptions, Decision } from '../shared/types.ts';
import type { BanCounter } from './ban.ts';
import { type Charge, chargeOf } from './charge.ts';
import { knowsState } from './headers.ts';
import type { HttpSettings } from './http-options.ts';
import { byIp, type Identity, type RequestLike } from './identity.ts';
import type { Charged, RefundByOutcome } from './refund-by-outcome.ts';
import type { LoadShedder } from './shed.ts';
import { failedClosed, LEFT_ALONE, rejectedKey, shed, type Verdict, verdictOn } from './verdict.ts';

/** What an unknown API key is counted by in shadow mode, where it may not be refused. */
const identifyByIp = byIp() as (req: RequestLike) => Identity | null;

/** `then` for a value that may have come at once: no promise turn when it has. */
function onceThere<T, U>(
  value: T | Promise<T>,
  next: (found: T) => U | Promise<U>,
): U | Promise<U> {
  return value instanceof Promise ? value.then(next) : next(value);
}

/** A verdict that passes the request on, with the slot of the fleet's it holds, if any. */
function withFleet(
  verdict: Verdict | Promise<Verdict>,
  fleet: Decision,
): Verdict | Promise<Verdict> {
  if (fleet.lease === undefined) return verdict;
  return onceThere(verdict, (found) => (found.action === 'next' ? { ...found, fleet } : found));
}

/** Refused by its limits for now: not for a cost no wait admits, nor by a failing store. */
function refusedForNow(decision: Decision): boolean {
  return !decision.allowed && knowsState(decision) && Number.isFinite(decision.retryAfterMs);
}

/**
 * Checks requests against one limiter. A chain of callbacks rather than async functions: no
 * promise of its own on top of the limiter's, on every request, and none at all for a request
 * a quota lease answers at once.
 */
export class RequestChecks<Req extends RequestLike, Res> {
  readonly #settings: HttpSettings<Req, Res>;
  readonly #limiter: Limiter;
  readonly #bans: BanCounter | undefined;
  readonly #refunds: RefundByOutcome<Req, Res>;
  readonly #report: (error: unknown, req: Req) => void;
  readonly #shedder: LoadShedder<Req> | undefined;

  constructor(
    settings: HttpSettings<Req, Res>,
    limiter: Limiter,
    bans: BanCounter | undefined,
    refunds: RefundByOutcome<Req, Res>,
    report: (error: unknown, req: Req) => void,
    shedder?: LoadShedder<Req>,
  ) {
    this.#settings = settings;
    this.#limiter = limiter;
    this.#bans = bans;
    this.#refunds = refunds;
    this.#report = report;
    this.#shedder = shedder;
  }

  /** A request whose skip, identify or cost failed: reported, then the failure mode decides. */
  #failed(error: unknown, req: Req): Verdict {
    this.#report(error, req);
    const { failClosed, shadow } = this.#settings;
    return failClosed && !shadow ? failedClosed() : LEFT_ALONE;
  }

  /**
   * What to answer a request: its skip, identify and cost, then its decision. The verdict itself
   * where everything was known at once (a quota lease's decision), else its promise.
   */
  check(req: Req): Verdict | Promise<Verdict> {
    let charge: Charge | undefined | Promise<Charge | undefined>;
    try {
      charge = chargeOf(req, this.#settings);
    } catch (error) {
      return Promise.resolve().then(() => this.#failed(error, req));
    }
    if (charge instanceof Promise) {
      return charge.then(
        (found) => this.#decide(req, found),
        (error: unknown) => this.#failed(error, req),
      );
    }
    return this.#decide(req, charge);
  }

  /**
   * The verdict on a request, once its charge is known: the fleet's count first, under `shed`,
   * then its own policies, in one script call where one call can take both. A slot of the
   * fleet's goes with a request passed on, to be released with its response.
   */
  #decide(req: Req, charge: Charge | undefined): Verdict | Promise<Verdict> {
    const shedder = this.#shedder;
    if (shedder === undefined || charge === undefined) return this.#decideOwn(req, charge);
    const report = (error: unknown) => this.#report(error, req);
    return shedder.isCritical(req, report).then((critical) => {
      const identity = charge.identity;
      // Shadow mode counts a request's own policies whatever the fleet's count says, and an
      // identity counted within another takes two calls of its own: these go one by one.
      if (this.#settings.shadow || identity === 'unauthorized' || identity?.within !== undefined) {
        return this.#decideAfterFleet(req, charge, shedder, critical);
      }
      const key = identity?.key ?? 'anonymous';
      const options = { cost: charge.cost, tier: identity?.tier, policies: identity?.policies };
      const both = legsOf(this.#limiter).consumeBeside(shedder.leg(critical), key, options);
      if (both === undefined) return this.#decideAfterFleet(req, charge, shedder, critical);
      return both.then(({ lead: fleet, own }) => {
        if (fleet.error) report(fleet.error);
        // The fleet refused ahead of the request's own policies, which were then never asked.
        // (A failing store never refuses it: `shed` fails open.)
        if (own === undefined) return shed(fleet);
        return withFleet(this.#verdictFor(req, charge.cost, key, own), fleet);
      });
    });
  }

  /**
   * The fleet's count and the request's own policies one after the other, where one call cannot
   * take both (a Cluster, whose fleet key and identity keys are in different hash slots, a cost
   * above 1, an identity counted within another), and in shadow mode. The fleet's slot is given
   * back at once when the request's own policies refuse it.
   */
  #decideAfterFleet(
    req: Req,
    charge: Charge,
    shedder: LoadShedder<Req>,
    critical: boolean,
  ): Promise<Verdict> {
    const report = (error: unknown) => this.#report(error, req);
    return shedder.acquire(critical, report).then((fleet) => {
      if (!fleet.allowed && fleet.degraded === undefined && !this.#settings.shadow) {
        return shed(fleet);
      }
      return onceThere(this.#decideOwn(req, charge), (verdict) => {
        if (fleet.lease !== undefined && verdict.action !== 'next') shedder.release(fleet, report);
        return withFleet(verdict, fleet);
      });
    });
  }

  /** The verdict of a request's own policies. */
  #decideOwn(req: Req, charge: Charge | undefined): Verdict | Promise<Verdict> {
    if (charge === undefined) return LEFT_ALONE;
    let { identity } = charge;
    if (identity === 'unauthorized') {
      if (!this.#settings.shadow) return rejectedKey();
      // Shadow mode may not refuse it: count the request as if it carried no key.
      identity = identifyByIp(req);
    }
    const key = identity?.key ?? 'anonymous';
    const options = { cost: charge.cost, tier: identity?.tier, policies: identity?.policies };
    const within = identity?.within;
    if (within !== undefined) return this.#decideWithin(req, charge.cost, key, options, within);
    const decided = legsOf(this.#limiter).consumeNow(key, options);
    if (!(decided instanceof Promise)) return this.#verdictFor(req, charge.cost, key, decided);
    return decided.then(
      (decision) => this.#verdictFor(req, charge.cost, key, decision),
      // The limiter answers store failures with a decision: only a cost it refuses lands here.
      (error: unknown) => this.#failed(error, req),
    );
  }

  /**
   * An identity counted within another, such as an unverified key within its client IP: the
   * outer budget first, so that a client inventing keys stops at its IP's limit without touching
   * their budgets, then the identity's own. What the outer one took is given back when the own
   * one refuses. Answered with the decision that refused, or else the one with less left.
   */
  #decideWithin(
    req: Req,
    cost: number,
    key: string,
    options: ConsumeOptions,
    within: string,
  ): Promise<Verdict> {
    return this.#limiter.consume(within, { cost }).then(
      (outer) => {
        if (!outer.allowed) return this.#verdictFor(req, cost, within, outer);
        return this.#limiter.consume(key, options).then((own) => {
          if (!own.allowed) {
            const failed = (error: unknown) => this.#report(error, req);
            this.#limiter.refund(within, { decision: outer }).catch(failed);
            // Its concurrency slots are not a refund's: they go back beside it.
            if (outer.lease !== undefined) this.#limiter.release(outer).catch(failed);
            return this.#verdictFor(req, cost, key, own);
          }
          if (outer.remaining < own.remaining) {
            return this.#verdictFor(req, cost, within, outer, { key, decision: own });
          }
          return this.#verdictFor(req, cost, key, own, { key: within, decision: outer });
        });
      },
      (error: unknown) => this.#failed(error, req),
    );
  }

  #verdictFor(
    req: Req,
    cost: number,
    key: string,
    decision: Decision,
    also?: Charged,
  ): Verdict | Promise<Verdict> {
    const { onLimited, shadow, now } = this.#settings;
    const bans = this.#bans;
    if (decision.error) this.#report(decision.error, req);
    this.#refunds.charged(key, decision, also);
    if (!decision.allowed && decision.degraded !== 'deny' && onLimited) {
      try {
        onLimited(req, decision);
      } catch (error) {
        this.#report(error, req);
      }
    }
    // Shadow mode refuses nothing, so nothing there counts towards a ban.
    if (bans && !shadow && refusedForNow(decision)) {
      return bans
        .count(key, decision, (error) => this.#report(error, req))
        .then((ban) => {
          if (ban !== undefined) legsOf(this.#limiter).telemetry?.countBanned(decision);
          return verdictOn(decision, cost, this.#settings, now, ban);
        });
    }
    const verdict = verdictOn(decision, cost, this.#settings, now);
    // The other budget's slots, for an identity counted within another, go with the response.
    if (also?.decision.lease !== undefined && verdict.action === 'next') {
      return { ...verdict, within: also.decision };
    }
    return verdict;
  }
}
