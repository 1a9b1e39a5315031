// @sentinel/koa: Koa middleware that maps a request to core's HTTP limiter and its verdict to a response.
import type { Decision, HttpLimiterOptions, Limiter, Verdict } from '@sentinel/core';
import {
  adapterLimiter,
  adapterOptions,
  checkFunction,
  handlerAnswers,
  routeLayering,
} from '@sentinel/core/internal';
import type { Context, Middleware, Next } from 'koa';

export * from '@sentinel/core/adapter';

declare module 'koa' {
  interface DefaultState {
    /**
     * The decision of the last `rateLimit()` this request passed; undefined when that one made
     * none (skipped or allow-listed) or none ran.
     */
    rateLimit?: Decision;
  }
}

export interface RateLimitOptions extends HttpLimiterOptions<Context, undefined> {
  /**
   * Whether a finished response was a success, for `skipSuccessfulRequests` and
   * `skipFailedRequests`: Koa's `ctx` holds the response too, so it comes alone.
   * @default a status below 400
   * @example (ctx) => ctx.status < 400 || ctx.status === 404
   */
  requestWasSuccessful?: (ctx: Context, none: undefined) => boolean | Promise<boolean>;
  /**
   * Answers a request refused by its limits instead of the problem+json body: a 429, a 403 past
   * the `ban` count, or a 403 for a cost larger than a limit. The status and RateLimit headers (and `Retry-After` with a 429)
   * are set already; set `ctx.status` and `ctx.body` as you like. A 401 for a rejected API key
   * and a 503 when failing closed keep their problem bodies.
   * @example (ctx, decision) => { ctx.status = 429; ctx.body = { retryIn: decision.retryAfterMs } }
   * @default undefined (a problem+json body)
   */
  handler?: (ctx: Context, decision: Decision) => void | Promise<void>;
}

/** The options of this adapter alone, beside core's: a misspelling of one is named too. */
const KOA_ONLY = ['handler'] satisfies readonly Exclude<
  keyof RateLimitOptions,
  keyof HttpLimiterOptions
>[];

/** A route's options, layered over those of the middleware whose `route()` takes them. */
export type RouteRateLimitOptions = Partial<RateLimitOptions>;

/** The middleware, plus the limiter behind it. */
export interface RateLimitMiddleware extends Middleware {
  /** The core limiter, for `peek` and `reset`. */
  readonly limiter: Limiter;
  /**
   * A middleware for one route, its options layered over these as Fastify's
   * `config.rateLimit` layers them: a route naming its own policies or store replaces these.
   * Used instead of this middleware it replaces it for the route; used after it, both count.
   * @example router.post('/search', limit.route({ group: 'search', cost: 5 }), search)
   */
  route(options: RouteRateLimitOptions): RateLimitMiddleware;
  /** Stops timers and closes the stores the limiter and its routes created; a Redis client you passed stays open. */
  close(): Promise<void>;
}

/**
 * Rate limits every request that reaches it and exposes the decision as `ctx.state.rateLimit`.
 * Errors thrown downstream pass through untouched, to Koa's error handling.
 * @example app.use(rateLimit({ redis, tiers: { FREE: { limit: 10, window: '1m' } } }))
 */
export function rateLimit(options: RateLimitOptions): RateLimitMiddleware {
  const given = adapterOptions(options, 'options', KOA_ONLY);
  const { handler } = given;
  if (handler !== undefined) checkFunction(handler, 'handler');
  const { http, connection } = adapterLimiter<Context, undefined, RateLimitOptions>(given);

  /** Answers the request by its verdict: passed on, or refused. */
  function answer(ctx: Context, next: Next, verdict: Verdict): Promise<void> {
    ctx.state.rateLimit = verdict.decision;
    // One set per header: `ctx.set(record)` walks Object.keys with a closure on every response.
    const { headers } = verdict;
    for (const name in headers) ctx.set(name, headers[name] as string);
    // Not wrapped: whatever downstream throws is Koa's to handle, exactly as thrown.
    if (verdict.action === 'next') {
      http.countByOutcome(verdict, ctx, undefined, ctx.res);
      return next();
    }
    ctx.status = verdict.status;
    if (handler !== undefined && handlerAnswers(verdict)) {
      return Promise.resolve(handler(ctx, verdict.decision));
    }
    ctx.type = 'application/problem+json';
    ctx.body = JSON.stringify(verdict.body);
    return Promise.resolve();
  }

  // Not async: a verdict that came at once (a quota lease's) is answered without a promise turn.
  function sentinelRateLimit(ctx: Context, next: Next): Promise<void> {
    try {
      const verdict = http.check(ctx);
      if (verdict instanceof Promise) return verdict.then((found) => answer(ctx, next, found));
      return answer(ctx, next, verdict);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  const layering = routeLayering(connection.options, rateLimit, http.close, connection);
  return Object.assign(sentinelRateLimit, { limiter: http.limiter, ...layering });
}
