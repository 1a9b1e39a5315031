// What a request counts as: the user's `skip`, `identify` and `cost` run for it, and checked.
import { describe } from '../shared/validation.ts';
import type { HttpSettings } from './http-options.ts';
import { type IdentifyResult, type Identity, isThenable, type RequestLike } from './identity.ts';

/** What a request counts as: who it is and what it costs. */
export interface Charge {
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
export function chargeOf<Req extends RequestLike>(
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
