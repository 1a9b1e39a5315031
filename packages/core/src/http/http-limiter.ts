// The framework-free heart of every adapter: identify, limit, and say what to answer.
import { createLimiter, type Limiter } from '../limiter/limiter.ts';
import { POLICY_FIELDS } from '../limiter/policy.ts';
import { connectOnce } from '../limiter/shared-connection.ts';
import { createReporter } from '../observe/reporter.ts';
import type { ConsumeOptions, Decision } from '../shared/types.ts';
import { describe } from '../shared/validation.ts';
import { BanCounter } from './ban.ts';
import { knowsState } from './headers.ts';
import { type HttpLimiterOptions, type HttpSettings, resolveHttpOptions } from './http-options.ts';
import {
  byIp,
  type IdentifyResult,
  type Identity,
  isThenable,
  type RequestLike,
} from './identity.ts';
import { type Charged, type NodeResponse, RefundByOutcome } from './refund-by-outcome.ts';
import { failedClosed, LEFT_ALONE, rejectedKey, type Verdict, verdictOn } from './verdict.ts';

export type { HttpLimiterOptions } from './http-options.ts';
export type { NodeResponse } from './refund-by-outcome.ts';
export type { RefusalReason, Verdict } from './verdict.ts';

export interface HttpLimiter<Req, Res = unknown> {
  check(req: Req): Promise<Verdict>;
  /**
   * Hands a passed request's response to `skipSuccessfulRequests` and `skipFailedRequests`:
   * once `raw`, the Node response under `res`, has finished or its client has left, what the
   * request took is given back if its outcome should not count. Call it for every verdict
   * `check` passes; it does nothing, at no cost, when neither option is on.
   */
  countByOutcome(verdict: Verdict, req: Req, res: Res, raw: NodeResponse): void;
  readonly limiter: Limiter;
  close(): Promise<void>;
}

/**
 * The limiter's onError. Every failure it reports also rides on the decision it returns, and
 * this layer reports it from there, once, with its request; the limiter has none to give.
 */
function reportedFromTheDecision(): void {}

/** What an unknown API key is counted by in shadow mode, where it may not be refused. */
const identifyByIp = byIp() as (req: RequestLike) => Identity | null;

/**
 * A route's options over the app's, as every adapter layers them. Options that cannot be
 * combined replace each other: a route naming its own policies (`policies`, `tiers`, or a
 * policy's fields at the top level, such as `limit`) replaces the app's, and one naming `store`,
 * `redis` or `redisUrl` replaces the app's store.
 */
export function mergeHttpLimiterOptions<Req, Res>(
  base: HttpLimiterOptions<Req, Res>,
  route: Partial<HttpLimiterOptions<Req, Res>>,
): HttpLimiterOptions<Req, Res> {
  const merged: HttpLimiterOptions<Req, Res> = { ...base };
  const names = (...keys: readonly (keyof HttpLimiterOptions<Req, Res>)[]) =>
    keys.some((key) => route[key] !== undefined);
  const drop = (...keys: readonly (keyof HttpLimiterOptions<Req, Res>)[]) => {
    for (const key of keys) delete merged[key];
  };
  if (names('policies', 'tiers')) drop(...POLICY_FIELDS);
  if (names('policies', 'tiers', ...POLICY_FIELDS)) drop('policies', 'tiers', 'defaultTier');
  if (names('store')) drop('redis', 'redisUrl', 'timeout', 'connectTimeout');
  if (names('redis')) drop('store', 'redisUrl');
  if (names('redisUrl')) drop('store', 'redis');
  return { ...merged, ...route };
}

/** What a request counts as: who it is and what it costs. */
interface Charge {
  identity: Identity | 'unauthorized' | null;
  cost: number;
}

/** An identify answer as the contract allows it, or a TypeError saying what came instead. */
function checkIdentity(found: IdentifyResult): Identity | 'unauthorized' | null {
  if (found === null || found === undefined || found === 'unauthorized') return found ?? null;
  if (typeof found !== 'object') {
    throw new TypeError(
      `\`identify\` returned ${describe(found)}, not { key, tier? }, null or 'unauthorized'`,
    );
  }
  if (typeof found.key !== 'string' || found.key.length === 0) {
    throw new TypeError(
      `\`identify\` returned a key that is ${describe(found.key)}, not a non-empty string`,
    );
  }
  if (found.tier !== undefined && typeof found.tier !== 'string') {
    throw new TypeError(
      `\`identify\` returned a tier that is ${describe(found.tier)}, not a string`,
    );
  }
  if (found.within !== undefined && (typeof found.within !== 'string' || found.within === '')) {
    throw new TypeError(
      `\`identify\` returned a within that is ${describe(found.within)}, not a non-empty string`,
    );
  }
  // The limiter checks the policies themselves, once per distinct set.
  if (
    found.policies !== undefined &&
    (typeof found.policies !== 'object' || found.policies === null)
  ) {
    throw new TypeError(
      `\`identify\` returned policies that are ${describe(found.policies)}, not a policy or a list of them`,
    );
  }
  return found;
}

type ChargeSettings<Req> = Pick<HttpSettings<Req>, 'allowed' | 'skip' | 'identify' | 'cost'>;

/**
 * Runs the user's `skip`, `identify` and `cost` for a request: undefined to leave it alone, or
 * what it counts as. Throws what they throw, and a TypeError for what they should not return.
 * The cost a function returns is checked by the limiter, which checks every cost it is given.
 * Answers at once when none of them is asynchronous, as with the defaults: a promise and the
 * turns of the event loop it waits would be most of what this step costs.
 */
function chargeOf<Req extends RequestLike>(
  req: Req,
  settings: ChargeSettings<Req>,
): Charge | undefined | Promise<Charge | undefined> {
  const { allowed, skip, identify, cost } = settings;
  if (allowed?.(req.ip)) return undefined;
  if (skip) return skippedOrCharged(req, settings);
  const found = identify(req);
  if (isThenable(found) || typeof cost === 'function') return charged(req, found, cost);
  return { identity: checkIdentity(found), cost };
}

async function skippedOrCharged<Req extends RequestLike>(
  req: Req,
  { skip, identify, cost }: ChargeSettings<Req>,
): Promise<Charge | undefined> {
  const skipped = await skip?.(req);
  if (typeof skipped !== 'boolean') {
    throw new TypeError(`\`skip\` returned ${describe(skipped)}, not true or false`);
  }
  if (skipped) return undefined;
  return charged(req, identify(req), cost);
}

async function charged<Req extends RequestLike>(
  req: Req,
  found: ReturnType<ChargeSettings<Req>['identify']>,
  cost: ChargeSettings<Req>['cost'],
): Promise<Charge> {
  const identity = checkIdentity(await found);
  return { identity, cost: typeof cost === 'function' ? await cost(req) : cost };
}

/** Refused by its limits for now: not for a cost no wait admits, nor by a failing store. */
function refusedForNow(decision: Decision): boolean {
  return !decision.allowed && knowsState(decision) && Number.isFinite(decision.retryAfterMs);
}

/**
 * The identity limiter and the ban counter, over one connection: with a counter, a Redis client
 * from `redisUrl` is built here for both (see connectOnce), and closed again if the options prove
 * bad. Without one (no `ban`, or `ban: 0`, which counts nothing), the limiter builds its own.
 */
function buildLimiters<Req, Res>(settings: HttpSettings<Req, Res>) {
  const { limiterOptions, ban } = settings;
  const shared = ban ? connectOnce(limiterOptions) : { options: limiterOptions, close: noClient };
  try {
    const limiter = createLimiter({ ...shared.options, onError: reportedFromTheDecision });
    const bans =
      ban === undefined ? undefined : new BanCounter(ban, shared.options, reportedFromTheDecision);
    return { limiter, bans, connection: shared };
  } catch (error) {
    void shared.close();
    throw error;
  }
}

const noClient = () => Promise.resolve();

/** Resolves adapter options once; `check` then runs per request. */
export function createHttpLimiter<Req extends RequestLike, Res = unknown>(
  options: HttpLimiterOptions<Req, Res>,
): HttpLimiter<Req, Res> {
  const settings = resolveHttpOptions(options);
  const { shadow, failClosed, onLimited, now } = settings;
  const { limiter, bans, connection } = buildLimiters(settings);
  const report = createReporter<[Req]>(
    settings.onError,
    '@sentinel/core',
    settings.limiterOptions.logger,
  );
  const refunds = new RefundByOutcome<Req, Res>(limiter, settings, report);

  /** A request whose skip, identify or cost failed: reported, then the failure mode decides. */
  function failed(error: unknown, req: Req): Verdict {
    report(error, req);
    return failClosed && !shadow ? failedClosed() : LEFT_ALONE;
  }

  function check(req: Req): Promise<Verdict> {
    let charge: Charge | undefined | Promise<Charge | undefined>;
    try {
      charge = chargeOf(req, settings);
    } catch (error) {
      return Promise.resolve().then(() => failed(error, req));
    }
    if (charge instanceof Promise) {
      return charge.then(
        (found) => decide(req, found),
        (error: unknown) => failed(error, req),
      );
    }
    return decide(req, charge);
  }

  /**
   * The verdict on a request, once its charge is known. A chain of callbacks rather than an
   * async function: no promise of its own on top of the limiter's, on every request.
   */
  function decide(req: Req, charge: Charge | undefined): Promise<Verdict> {
    if (charge === undefined) return Promise.resolve(LEFT_ALONE);
    let { identity } = charge;
    if (identity === 'unauthorized') {
      if (!shadow) return Promise.resolve(rejectedKey());
      // Shadow mode may not refuse it: count the request as if it carried no key.
      identity = identifyByIp(req);
    }
    const key = identity?.key ?? 'anonymous';
    const options = { cost: charge.cost, tier: identity?.tier, policies: identity?.policies };
    const within = identity?.within;
    if (within !== undefined) return decideWithin(req, charge.cost, key, options, within);
    return limiter.consume(key, options).then(
      (decision) => verdictFor(req, charge.cost, key, decision),
      // The limiter answers store failures with a decision: only a cost it refuses lands here.
      (error: unknown) => failed(error, req),
    );
  }

  /**
   * An identity counted within another, such as an unverified key within its client IP: the
   * outer budget first, so that a client inventing keys stops at its IP's limit without touching
   * their budgets, then the identity's own. What the outer one took is given back when the own
   * one refuses. Answered with the decision that refused, or else the one with less left.
   */
  function decideWithin(
    req: Req,
    cost: number,
    key: string,
    options: ConsumeOptions,
    within: string,
  ): Promise<Verdict> {
    return limiter.consume(within, { cost }).then(
      (outer) => {
        if (!outer.allowed) return verdictFor(req, cost, within, outer);
        return limiter.consume(key, options).then((own) => {
          if (!own.allowed) {
            limiter
              .refund(within, { decision: outer })
              .catch((error: unknown) => report(error, req));
            return verdictFor(req, cost, key, own);
          }
          if (outer.remaining < own.remaining) {
            return verdictFor(req, cost, within, outer, { key, decision: own });
          }
          return verdictFor(req, cost, key, own, { key: within, decision: outer });
        });
      },
      (error: unknown) => failed(error, req),
    );
  }

  function verdictFor(
    req: Req,
    cost: number,
    key: string,
    decision: Decision,
    also?: Charged,
  ): Verdict | Promise<Verdict> {
    if (decision.error) report(decision.error, req);
    refunds.charged(key, decision, also);
    if (!decision.allowed && decision.degraded !== 'deny' && onLimited) {
      try {
        onLimited(req, decision);
      } catch (error) {
        report(error, req);
      }
    }
    // Shadow mode refuses nothing, so nothing there counts towards a ban.
    if (bans && !shadow && refusedForNow(decision)) {
      return bans
        .count(key, decision, (error) => report(error, req))
        .then((ban) => verdictOn(decision, cost, settings, now, ban));
    }
    return verdictOn(decision, cost, settings, now);
  }

  return {
    check,
    countByOutcome(verdict, req, res, raw) {
      if (refunds.active) refunds.watch(verdict.decision, req, res, raw);
    },
    limiter,
    async close() {
      await Promise.all([limiter.close(), bans?.close()]);
      await connection.close();
    },
  };
}
