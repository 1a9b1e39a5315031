// rateLimit(): Express middleware that asks core's HTTP limiter and turns its verdict into a response.
import type { Decision, HttpLimiterOptions, Limiter, Verdict } from '@sentinel/core';
import {
  adapterLimiter,
  adapterOptions,
  checkFunction,
  handlerAnswers,
  routeLayering,
} from '@sentinel/core/internal';
import type { NextFunction, Request, Response } from 'express';

declare global {
  // Express 4 and 5 types both merge this global interface into their `Request`.
  namespace Express {
    interface Request {
      /**
       * Sentinel's decision for this request: set by the last `rateLimit()` it passed, and
       * undefined when that one made none (skipped or allow-listed) or none ran.
       */
      rateLimit?: Decision;
    }
  }
}

/**
 * Answers a request refused by its limits instead of Sentinel's problem body. When it runs, the
 * rate-limit headers are set and `res.statusCode` is 429 (with `Retry-After`), 403 past the `ban`
 * count (with `Retry-After`), or 403 for a cost larger than a limit; answer the request or call
 * `next`.
 */
export type RateLimitHandler = (
  req: Request,
  res: Response,
  next: NextFunction,
  decision: Decision,
) => void | Promise<void>;

export interface RateLimitOptions extends HttpLimiterOptions<Request, Response> {
  /**
   * Answers requests refused by their limits instead of the `application/problem+json` body. A
   * 401 for a rejected API key and a 503 when failing closed keep their problem bodies.
   * @default undefined (a problem+json body)
   * @example (req, res) => res.status(429).json({ error: 'slow down' })
   */
  handler?: RateLimitHandler;
}

/** A route's options, layered over those of the middleware whose `route()` takes them. */
export type RouteRateLimitOptions = Partial<RateLimitOptions>;

/** The middleware, with the limiter it owns. */
export interface RateLimitMiddleware {
  /** A promise while the decision is awaited; nothing when it came at once, from a quota lease. */
  (req: Request, res: Response, next: NextFunction): void | Promise<void>;
  /** The core limiter behind this middleware, for `peek` and `reset`. */
  readonly limiter: Limiter;
  /**
   * A middleware for one route, its options layered over these as Fastify's
   * `config.rateLimit` layers them: a route naming its own policies or store replaces these.
   * Mounted before this middleware it replaces it for the route; mounted after, both count.
   * @example app.post('/search', limit.route({ group: 'search', cost: 5 }), search)
   */
  route(options: RouteRateLimitOptions): RateLimitMiddleware;
  /** Closes the limiter, those of its routes and the stores they created; a Redis client you passed stays open. */
  close(): Promise<void>;
}

/** The options of this adapter alone, beside core's: a misspelling of one is named too. */
const EXPRESS_ONLY = ['handler'] satisfies readonly Exclude<
  keyof RateLimitOptions,
  keyof HttpLimiterOptions
>[];

type Refusal = Extract<Verdict, { action: 'respond' }>;

function writeHeaders(res: Response, headers: Record<string, string>): void {
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
}

/**
 * Rate limits every request that passes through it: `app.use(rateLimit(options))`, or per route
 * with `route()`. Each call owns one limiter.
 * @example app.use(rateLimit({ redis, tiers: { FREE: { limit: 10, window: '1m' } } }))
 */
export function rateLimit(options: RateLimitOptions): RateLimitMiddleware {
  const given = adapterOptions(options, 'options', EXPRESS_ONLY);
  const { handler } = given;
  if (handler !== undefined) checkFunction(handler, 'handler');
  const { http, connection } = adapterLimiter<Request, Response, RateLimitOptions>(given);

  /** Answers the request by its verdict: passed on, or refused. */
  function answer(req: Request, res: Response, next: NextFunction, verdict: Verdict) {
    req.rateLimit = verdict.decision;
    writeHeaders(res, verdict.headers);
    // Called outside any try: an error downstream is Express's to route, never ours to catch.
    if (verdict.action === 'next') {
      http.countByOutcome(verdict, req, res, res);
      return next();
    }
    return refuse(req, res, next, verdict);
  }

  async function refuse(req: Request, res: Response, next: NextFunction, verdict: Refusal) {
    res.status(verdict.status);
    if (handler && handlerAnswers(verdict)) {
      try {
        await handler(req, res, next, verdict.decision);
      } catch (error) {
        next(error);
      }
      return;
    }
    // Not res.json(): Express would add `charset`, which JSON media types do not define.
    res.setHeader('Content-Type', 'application/problem+json');
    res.end(JSON.stringify(verdict.body));
  }

  // Not async: a verdict that came at once (a quota lease's) is answered without a promise turn.
  function sentinelRateLimit(req: Request, res: Response, next: NextFunction) {
    let verdict: Verdict | Promise<Verdict>;
    try {
      verdict = http.check(req);
    } catch (error) {
      // check() resolves every store, request and callback failure to a verdict; only a bug
      // lands here, and Express's error handler owns it.
      next(error);
      return;
    }
    if (!(verdict instanceof Promise)) return answer(req, res, next, verdict);
    return verdict.then((found) => answer(req, res, next, found), next);
  }

  const layering = routeLayering(connection.options, rateLimit, http.close, connection);
  return Object.assign(sentinelRateLimit, { limiter: http.limiter, ...layering });
}
