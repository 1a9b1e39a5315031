// @sentinel/hono: Hono middleware that maps a request to core's HTTP limiter and its verdict to a response.
import type {
  Decision,
  FetchRequestLike,
  HttpLimiterOptions,
  Limiter,
  TrustProxy,
} from '@sentinel/core';
import {
  abandoned,
  adapterLimiter,
  adapterOptions,
  admitted,
  checkFunction,
  fail,
  following,
  RequestFields,
  refusal,
  routeLayering,
  runtimeAddress,
} from '@sentinel/core/internal';
import type { Context, Env, MiddlewareHandler } from 'hono';
import type { ConnInfo } from 'hono/conninfo';

export type { FetchRequestLike, HeaderRecord, TrustProxy } from '@sentinel/core';
export * from '@sentinel/core/adapter';

/** What `identify`, `skip`, `cost` and the other options' functions get for a request. */
export interface RateLimitRequest<E extends Env = Env> extends FetchRequestLike {
  /** The request's Hono context: `c.get(...)` for what earlier middleware found, such as a user. */
  readonly c: Context<E>;
}

/** The context variable the decision is set under: `c.get('rateLimit')` unless `contextKey` says otherwise. */
export type RateLimitVariables<Key extends string = 'rateLimit'> = {
  [K in Key]: Decision | undefined;
};

export interface RateLimitOptions<E extends Env = Env, Key extends string = 'rateLimit'>
  extends HttpLimiterOptions<RateLimitRequest<E>, Response> {
  /**
   * The connection's address, as Hono's `ipRestriction` takes it: `getConnInfo` from your
   * runtime's adapter (`@hono/node-server/conninfo`, `hono/bun`, `hono/deno`, ...). The default
   * reads the connection on Node (`@hono/node-server`), Bun and Deno, and finds none elsewhere.
   * Never a request header: `trustProxy` says which of those to believe.
   * @default the connection's address on @hono/node-server, Bun and Deno
   * @example import { getConnInfo } from 'hono/cloudflare-workers'
   */
  getConnInfo?: (c: Context<E>) => ConnInfo;
  /**
   * Which proxies' X-Forwarded-For to believe, as Express's `trust proxy` reads it: `false`, a
   * number of hops, addresses or CIDR ranges (or `'loopback'`), a function, or `true` (every
   * hop, so the left-most entry, which any client can write).
   * @default false (the connection's address is the client's)
   * @example 1
   */
  trustProxy?: TrustProxy;
  /**
   * The context variable the decision is set under. Give each limiter of an app its own, so that
   * one does not hide the other's.
   * @default 'rateLimit'
   * @example 'searchLimit'
   */
  contextKey?: Key;
  /**
   * Answers requests refused by their limits instead of the problem+json body: a 429, a 403
   * past the `ban` count, or a 403 for a cost larger than a limit. `c.status` is set to that
   * status already, and the RateLimit headers (and `Retry-After` with a 429) are added to what it
   * returns. A 401 for a rejected API key and a 503 when failing closed keep their problem bodies.
   * @default undefined (a problem+json body)
   * @example (c, decision) => c.json({ retryIn: decision.retryAfterMs })
   */
  handler?: (c: Context<E>, decision: Decision) => Response | Promise<Response>;
}

/** A route's options, layered over those of the middleware whose `route()` takes them. */
export type RouteRateLimitOptions<E extends Env = Env, Key extends string = 'rateLimit'> = Partial<
  RateLimitOptions<E, Key>
>;

/** The middleware, plus the limiter behind it. */
export interface RateLimitMiddleware<Key extends string = 'rateLimit'>
  extends MiddlewareHandler<{ Variables: RateLimitVariables<Key> }> {
  /** The core limiter, for `peek` and `reset`. */
  readonly limiter: Limiter;
  /**
   * A middleware for one route, its options layered over these: a route naming its own
   * policies or store replaces these. Used instead of this middleware it replaces it for the
   * route; used after it, both count.
   * @example app.post('/search', limit.route({ group: 'search', cost: 5 }), search)
   */
  route<RouteKey extends string = Key>(
    options: RouteRateLimitOptions<Env, RouteKey>,
  ): RateLimitMiddleware<RouteKey>;
  /** Stops timers and closes the stores the limiter and its routes created; a Redis client you passed stays open. */
  close(): Promise<void>;
}

/** The options of this adapter alone, beside core's: a misspelling of one is named too. */
const HONO_ONLY = ['getConnInfo', 'trustProxy', 'contextKey', 'handler'] satisfies readonly Exclude<
  keyof RateLimitOptions,
  keyof HttpLimiterOptions
>[];

// biome-ignore lint/suspicious/noExplicitAny: any Env and key; only the names are removed.
function withoutOwnOptions<O extends RateLimitOptions<any, string>>(options: O): O {
  const { getConnInfo: _, trustProxy: __, contextKey: ___, ...rest } = options;
  return rest as O;
}

function checkContextKey(key: unknown): asserts key is string {
  if (typeof key !== 'string' || key.length === 0) {
    fail('contextKey', `must be a non-empty string, got ${String(key)}`);
  }
}

/**
 * Rate limits every request that reaches it and sets the decision as `c.get('rateLimit')`.
 * Concurrency slots are held until the response's body has been sent, streams included, or
 * its client has left.
 * @example app.use(rateLimit({ redis, limit: 100, window: '1m' }))
 */
export function rateLimit<Key extends string = 'rateLimit', E extends Env = Env>(
  options: RateLimitOptions<E, Key>,
): RateLimitMiddleware<Key> {
  const given = adapterOptions(options, 'options', HONO_ONLY);
  const { getConnInfo, trustProxy, contextKey = 'rateLimit' as Key, handler } = given;
  if (getConnInfo !== undefined) checkFunction(getConnInfo, 'getConnInfo');
  checkContextKey(contextKey);
  if (handler !== undefined) checkFunction(handler, 'handler');
  const fields = new RequestFields(trustProxy, 'getConnInfo');
  const addressOf = getConnInfo
    ? (c: Context<E>) => getConnInfo(c).remote.address
    : (c: Context<E>) => runtimeAddress(c.req.raw, c.env);
  const answer =
    handler && ((req: RateLimitRequest<E>, decision: Decision) => handler(req.c, decision));
  type Req = RateLimitRequest<E>;
  // handler is stripped by adapterLimiter; the rest of this adapter's options go with it to route().
  const { http, connection } = adapterLimiter<Req, Response, RateLimitOptions<E, Key>>(
    withoutOwnOptions(given),
  );

  const sentinelRateLimit: MiddlewareHandler = async (c, next) => {
    const context = c as unknown as Context<E>;
    const req: Req = { ...fields.of(c.req.raw, addressOf(context)), c: context };
    fields.checkAddress(req, (error) => http.report(error, req));
    // A verdict that came at once (a quota lease's) is used without a promise turn.
    const checked = http.check(req);
    const verdict = checked instanceof Promise ? await checked : checked;
    c.set(contextKey, verdict.decision);
    if (verdict.action === 'respond') {
      c.status(verdict.status);
      return refusal(verdict, req, answer);
    }
    const end = following(http, verdict, req);
    try {
      await next();
    } catch (error) {
      // Hono answers a handler's error itself; this is a middleware's own, rethrown as it came.
      abandoned(http, verdict, req, end);
      throw error;
    }
    const response = admitted(http, verdict, req, c.res, end);
    if (response !== c.res) c.res = response;
  };

  // The client connectOnce built from `redisUrl` replaces it for the routes too, as in Express
  // and Koa; this adapter's own options, which core's limiter does not take, go back in.
  const layering = routeLayering(
    { ...connection.options, getConnInfo, trustProxy, contextKey },
    (layered) => rateLimit<Key, E>(layered),
    http.close,
    connection,
  );
  return Object.assign(sentinelRateLimit, {
    limiter: http.limiter,
    ...layering,
  }) as unknown as RateLimitMiddleware<Key>;
}
