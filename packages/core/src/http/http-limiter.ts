// The framework-free heart of every adapter: identify, limit, and say what to answer.
import { SentinelError } from '../errors.ts';
import { createLimiter, type Limiter, type LimiterOptions } from '../limiter.ts';
import type { Decision } from '../types.ts';
import { ipMatcher } from './client-ip.ts';
import {
  type HeaderFormat,
  rateLimitHeaders,
  resolveHeaderFormats,
  retryAfterSeconds,
} from './headers.ts';
import {
  byApiKey,
  byIp,
  chain,
  type Identifier,
  type Identity,
  type RequestLike,
} from './identity.ts';
import { type ProblemDetails, quotaExceeded, unauthorized, unavailable } from './problem.ts';

export interface HttpLimiterOptions<Req = RequestLike> extends Omit<LimiterOptions, 'onError'> {
  /**
   * Who the request is. Identities without a tier get `defaultTier`.
   * @default chain(byApiKey(), byIp())
   */
  identify?: Identifier<Req>;
  /**
   * Header formats to send; several may be combined with `'legacy'`, or `false` for none.
   * @default 'draft-11'
   */
  headers?: HeaderFormat | readonly HeaderFormat[] | false;
  /** Tokens a request costs, or a function of the request. @default 1 */
  cost?: number | ((req: Req) => number | Promise<number>);
  /**
   * Routes limited with the same group share one budget; without one, limiters with the same
   * policies and prefix share theirs.
   */
  group?: string;
  /** Requests to leave alone. */
  skip?: (req: Req) => boolean | Promise<boolean>;
  /** Client IPs or CIDR ranges never limited. */
  allowList?: readonly string[];
  /** Called for every request over its limit, in shadow mode too. What it throws goes to `onError`. */
  onLimited?: (req: Req, decision: Decision) => void;
  /** Called for every failure: the store, an unknown tier, or an `identify`, `cost` or `skip` that threw. */
  onError?: (error: Error, req: Req) => void;
  /** `'shadow'` evaluates, sets headers and calls back, but never blocks. @default 'enforce' */
  mode?: 'enforce' | 'shadow';
}

/** What the adapter should do with a request. */
export type Verdict =
  | { action: 'next'; headers: Record<string, string>; decision: Decision | undefined }
  | {
      action: 'respond';
      /** Over the limit (429), an API key the lookup rejected (401), or failing closed (503). */
      reason: 'limited' | 'unauthorized' | 'unavailable';
      status: 401 | 429 | 503;
      headers: Record<string, string>;
      body: ProblemDetails;
      decision: Decision | undefined;
    };

export interface HttpLimiter<Req> {
  check(req: Req): Promise<Verdict>;
  readonly limiter: Limiter;
  close(): Promise<void>;
}

const GROUP = /^[A-Za-z0-9_.-]{1,64}$/;
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
const NO_HEADERS: Record<string, string> = Object.freeze({}) as Record<string, string>;

function fail(option: string, problem: string): never {
  throw new TypeError(`@sentinel/core: \`${option}\` ${problem}`);
}

/** Resolves adapter options once; `check` then runs per request. */
export function createHttpLimiter<Req extends RequestLike>(
  options: HttpLimiterOptions<Req>,
): HttpLimiter<Req> {
  const {
    identify = chain<Req>(byApiKey(), byIp()),
    headers = 'draft-11',
    cost = 1,
    group,
    skip,
    allowList,
    onLimited,
    onError,
    mode = 'enforce',
    prefix = 'sentinel',
    ...limiterOptions
  } = options;
  if (typeof identify !== 'function') fail('identify', 'must be a function');
  const formats = resolveHeaderFormats(headers);
  if (typeof cost !== 'function' && (!Number.isSafeInteger(cost) || cost < 1)) {
    fail('cost', `must be a positive integer or a function, got ${String(cost)}`);
  }
  if (group !== undefined && (typeof group !== 'string' || !GROUP.test(group))) {
    fail('group', 'must be 1 to 64 letters, digits, `_`, `-` or `.`');
  }
  for (const [name, value] of Object.entries({ skip, onLimited, onError })) {
    if (value !== undefined && typeof value !== 'function') fail(name, 'must be a function');
  }
  if (allowList !== undefined && !Array.isArray(allowList))
    fail('allowList', 'must be a list of IPs or CIDR ranges');
  const allowed = allowList && allowList.length > 0 ? ipMatcher(allowList, 'allowList') : undefined;
  if (mode !== 'enforce' && mode !== 'shadow')
    fail('mode', `must be 'enforce' or 'shadow', got ${String(mode)}`);
  const shadow = mode === 'shadow';
  const failClosed = limiterOptions.onStoreError === 'deny';

  const limiter = createLimiter({
    ...limiterOptions,
    prefix: group === undefined ? prefix : `${prefix}:${group}`,
    // Failures reach onError with their request, from the decision that carries them.
    onError: () => {},
  });

  let warned = false;
  // Callbacks observe; a callback that throws must not turn a request into a 500.
  function report(error: unknown, req: Req): void {
    const reported =
      error instanceof Error ? error : new SentinelError('STORE_FAILED', String(error));
    try {
      if (onError) {
        onError(reported, req);
      } else if (!warned) {
        warned = true;
        process.emitWarning(
          `@sentinel: ${reported.message} (further failures are silent without onError)`,
          'SentinelWarning',
        );
      }
    } catch (thrown) {
      process.emitWarning(`@sentinel: onError threw: ${String(thrown)}`, 'SentinelWarning');
    }
  }

  function limited(req: Req, decision: Decision): void {
    try {
      onLimited?.(req, decision);
    } catch (error) {
      report(error, req);
    }
  }

  function respond(
    reason: 'limited' | 'unauthorized' | 'unavailable',
    status: 401 | 429 | 503,
    headers: Record<string, string>,
    body: ProblemDetails,
    decision?: Decision,
  ): Verdict {
    return { action: 'respond', reason, status, headers, body, decision };
  }

  /** A failure outside the store (identify, cost, skip): the failure mode decides. */
  function failedBefore(error: unknown, req: Req): Verdict {
    report(error, req);
    if (failClosed && !shadow)
      return respond('unavailable', 503, { 'Retry-After': '1' }, unavailable());
    return { action: 'next', headers: NO_HEADERS, decision: undefined };
  }

  async function check(req: Req): Promise<Verdict> {
    let identity: Awaited<ReturnType<Identifier<Req>>>;
    let units: number;
    try {
      if (allowed?.(req.ip) || (skip && (await skip(req)))) {
        return { action: 'next', headers: NO_HEADERS, decision: undefined };
      }
      identity = await identify(req);
      units = typeof cost === 'function' ? await cost(req) : cost;
      if (!Number.isSafeInteger(units) || units < 1) {
        throw new TypeError(
          `@sentinel/core: \`cost\` returned ${String(units)}, not a positive integer`,
        );
      }
    } catch (error) {
      return failedBefore(error, req);
    }
    if (identity === 'unauthorized') {
      if (!shadow) return respond('unauthorized', 401, NO_HEADERS, unauthorized());
      // Shadow mode may not refuse it: count the request as if it carried no key.
      identity = await identifyByIp(req);
    }
    const key = identity?.key ?? 'anonymous';
    const decision = await limiter.consume(key, { cost: units, tier: identity?.tier });
    if (decision.error) report(decision.error, req);
    const headers = formats.length === 0 ? {} : rateLimitHeaders(decision, formats);
    if (decision.allowed) return { action: 'next', headers, decision };
    if (decision.degraded === 'deny') {
      headers['Retry-After'] = String(retryAfterSeconds(decision));
      return shadow
        ? { action: 'next', headers, decision }
        : respond('unavailable', 503, headers, unavailable(), decision);
    }
    limited(req, decision);
    const retryAfter = retryAfterSeconds(decision);
    headers['Retry-After'] = String(retryAfter);
    if (shadow) return { action: 'next', headers, decision };
    return respond('limited', 429, headers, quotaExceeded(decision, retryAfter), decision);
  }

  return { check, limiter, close: () => limiter.close() };
}
