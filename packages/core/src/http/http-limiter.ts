// The framework-free heart of every adapter: identify, limit, and say what to answer.
import { createLimiter, type Limiter } from '../limiter.ts';
import { createReporter } from '../reporter.ts';
import type { Decision } from '../types.ts';
import { describe } from '../validation.ts';
import { type HttpLimiterOptions, type HttpSettings, resolveHttpOptions } from './http-options.ts';
import { byIp, type IdentifyResult, type Identity, type RequestLike } from './identity.ts';
import { failedClosed, LEFT_ALONE, rejectedKey, type Verdict, verdictOn } from './verdict.ts';

export type { HttpLimiterOptions } from './http-options.ts';
export type { RefusalReason, Verdict } from './verdict.ts';

export interface HttpLimiter<Req> {
  check(req: Req): Promise<Verdict>;
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
 * combined replace each other: a route naming its own policies (`policies`, `tiers`, or
 * `limit`/`window`/`algorithm`) replaces the app's, and one naming `store` or `redis` replaces
 * the app's store.
 */
export function mergeHttpLimiterOptions<Req>(
  base: HttpLimiterOptions<Req>,
  route: Partial<HttpLimiterOptions<Req>>,
): HttpLimiterOptions<Req> {
  const merged: HttpLimiterOptions<Req> = { ...base };
  const names = (...keys: (keyof HttpLimiterOptions<Req>)[]) =>
    keys.some((key) => route[key] !== undefined);
  if (names('policies', 'tiers')) {
    for (const key of ['limit', 'window', 'algorithm'] as const) delete merged[key];
  }
  if (names('policies', 'tiers', 'limit', 'window', 'algorithm')) {
    for (const key of ['policies', 'tiers', 'defaultTier'] as const) delete merged[key];
  }
  if (names('store')) {
    for (const key of ['redis', 'timeout', 'connectTimeout'] as const) delete merged[key];
  }
  if (names('redis')) delete merged.store;
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

/**
 * Runs the user's `skip`, `identify` and `cost` for a request: undefined to leave it alone, or
 * what it counts as. Throws what they throw, and a TypeError for what they should not return.
 * The cost a function returns is checked by the limiter, which checks every cost it is given.
 */
async function chargeOf<Req extends RequestLike>(
  req: Req,
  { allowed, skip, identify, cost }: HttpSettings<Req>,
): Promise<Charge | undefined> {
  if (allowed?.(req.ip)) return undefined;
  if (skip) {
    const skipped = await skip(req);
    if (typeof skipped !== 'boolean') {
      throw new TypeError(`\`skip\` returned ${describe(skipped)}, not true or false`);
    }
    if (skipped) return undefined;
  }
  const identity = checkIdentity(await identify(req));
  return { identity, cost: typeof cost === 'function' ? await cost(req) : cost };
}

/** Resolves adapter options once; `check` then runs per request. */
export function createHttpLimiter<Req extends RequestLike>(
  options: HttpLimiterOptions<Req>,
): HttpLimiter<Req> {
  const settings = resolveHttpOptions(options);
  const { shadow, failClosed, onLimited, now } = settings;
  const limiter = createLimiter({
    ...settings.limiterOptions,
    onError: reportedFromTheDecision,
  });
  const report = createReporter<[Req]>(
    settings.onError,
    '@sentinel/core',
    settings.limiterOptions.logger,
  );

  /** A request whose skip, identify or cost failed: reported, then the failure mode decides. */
  function failed(error: unknown, req: Req): Verdict {
    report(error, req);
    return failClosed && !shadow ? failedClosed() : LEFT_ALONE;
  }

  async function check(req: Req): Promise<Verdict> {
    let charge: Charge | undefined;
    try {
      charge = await chargeOf(req, settings);
    } catch (error) {
      return failed(error, req);
    }
    if (charge === undefined) return LEFT_ALONE;
    let { identity } = charge;
    if (identity === 'unauthorized') {
      if (!shadow) return rejectedKey();
      // Shadow mode may not refuse it: count the request as if it carried no key.
      identity = identifyByIp(req);
    }
    let decision: Decision;
    try {
      decision = await limiter.consume(identity?.key ?? 'anonymous', {
        cost: charge.cost,
        tier: identity?.tier,
        policies: identity?.policies,
      });
    } catch (error) {
      // The limiter answers store failures with a decision: only a cost it refuses lands here.
      return failed(error, req);
    }
    if (decision.error) report(decision.error, req);
    if (!decision.allowed && decision.degraded !== 'deny' && onLimited) {
      try {
        onLimited(req, decision);
      } catch (error) {
        report(error, req);
      }
    }
    return verdictOn(decision, charge.cost, settings, now());
  }

  return { check, limiter, close: () => limiter.close() };
}
