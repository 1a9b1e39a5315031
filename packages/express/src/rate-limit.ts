// rateLimit(): Express middleware that asks core's HTTP limiter and turns its verdict into a response.
import {
  createHttpLimiter,
  type Decision,
  type HttpLimiterOptions,
  type Limiter,
  type Verdict,
} from '@sentinel/core';
import type { NextFunction, Request, Response } from 'express';

declare global {
  // Express 4 and 5 types both merge this global interface into their `Request`.
  namespace Express {
    interface Request {
      /**
       * Sentinel's decision for this request; undefined when it was skipped, allow-listed or
       * could not be identified. The last `rateLimit()` a request passed sets it.
       */
      rateLimit?: Decision;
    }
  }
}

/**
 * Answers a request over its limit instead of Sentinel's 429. When it runs, the rate-limit
 * headers and `Retry-After` are set and `res.statusCode` is 429; answer the request or call `next`.
 */
export type RateLimitHandler = (
  req: Request,
  res: Response,
  next: NextFunction,
  decision: Decision,
) => void | Promise<void>;

export interface RateLimitOptions extends HttpLimiterOptions<Request> {
  /**
   * Answers requests over their limit instead of the 429 `application/problem+json` body. A 401
   * for a rejected API key and a 503 when failing closed keep their problem bodies.
   * @default undefined (a 429 problem+json body)
   * @example (req, res) => res.status(429).json({ error: 'slow down' })
   */
  handler?: RateLimitHandler;
}

/** The middleware, with the limiter it owns. */
export interface RateLimitMiddleware {
  (req: Request, res: Response, next: NextFunction): Promise<void>;
  /** The core limiter behind this middleware, for `peek` and `reset`. */
  readonly limiter: Limiter;
  /** Closes the limiter and the store it created; a Redis client you passed stays open. */
  close(): Promise<void>;
}

function writeHeaders(res: Response, headers: Record<string, string>): void {
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
}

/**
 * Rate limits every request that passes through it: `app.use(rateLimit(options))`, or per route
 * as `router.get('/x', rateLimit(options), handler)`. Each call owns one limiter.
 * @example app.use(rateLimit({ redis, tiers: { FREE: { limit: 10, window: '1m' } } }))
 */
export function rateLimit(options: RateLimitOptions): RateLimitMiddleware {
  if (options === null || typeof options !== 'object') {
    throw new TypeError('@sentinel/express: `rateLimit` takes an options object');
  }
  const { handler, ...limiterOptions } = options;
  if (handler !== undefined && typeof handler !== 'function') {
    throw new TypeError('@sentinel/express: `handler` must be a function');
  }
  const http = createHttpLimiter<Request>(limiterOptions);

  async function sentinelRateLimit(req: Request, res: Response, next: NextFunction) {
    let verdict: Verdict;
    try {
      verdict = await http.check(req);
    } catch (error) {
      // check() resolves every store, request and callback failure to a verdict; only a bug
      // lands here, and Express's error handler owns it.
      next(error);
      return;
    }
    req.rateLimit = verdict.decision;
    writeHeaders(res, verdict.headers);
    // Called outside any try: an error downstream is Express's to route, never ours to catch.
    if (verdict.action === 'next') return next();
    res.status(verdict.status);
    if (handler && verdict.reason === 'limited' && verdict.decision) {
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

  return Object.assign(sentinelRateLimit, { limiter: http.limiter, close: http.close });
}
