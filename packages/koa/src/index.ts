// @sentinel/koa: Koa middleware that maps a request to core's HTTP limiter and its verdict to a response.
import {
  createHttpLimiter,
  type Decision,
  type HttpLimiterOptions,
  type Limiter,
} from '@sentinel/core';
import type { Context, Middleware, Next } from 'koa';

export {
  type Algorithm,
  type ApiKeyOptions,
  type ApiKeyTenant,
  byApiKey,
  byHeader,
  byIp,
  chain,
  type Decision,
  type HeaderFormat,
  type Identifier,
  type IdentifyResult,
  type Identity,
  type IpOptions,
  MemoryStore,
  type PolicyDecision,
  type PolicyOptions,
  type ProblemDetails,
  RedisStore,
  SentinelError,
  type TierOptions,
  type Window,
} from '@sentinel/core';

declare module 'koa' {
  interface DefaultState {
    /** The decision for this request; absent when it was skipped, allow-listed or not identified. */
    rateLimit?: Decision;
  }
}

export interface RateLimitOptions extends HttpLimiterOptions<Context> {
  /**
   * Answers a request over its limit (a 429) instead of the problem+json body. The RateLimit
   * headers and `Retry-After` are set already; set `ctx.status` and `ctx.body` as you like.
   * @example (ctx, decision) => { ctx.status = 429; ctx.body = { retryIn: decision.retryAfterMs } }
   */
  handler?: (ctx: Context, decision: Decision) => void | Promise<void>;
}

/** The middleware, plus the limiter behind it. */
export interface RateLimitMiddleware extends Middleware {
  /** The core limiter, for `peek` and `reset`. */
  readonly limiter: Limiter;
  /** Stops timers and closes the stores the limiter created; a Redis client you passed stays open. */
  close(): Promise<void>;
}

/**
 * Rate limits every request that reaches it and exposes the decision as `ctx.state.rateLimit`.
 * Errors thrown downstream pass through untouched, to Koa's error handling.
 * @example app.use(rateLimit({ redis, tiers: { FREE: { limit: 10, window: '1m' } } }))
 */
export function rateLimit(options: RateLimitOptions = {}): RateLimitMiddleware {
  const { handler, ...httpOptions } = options;
  if (handler !== undefined && typeof handler !== 'function') {
    throw new TypeError('@sentinel/koa: `handler` must be a function');
  }
  const http = createHttpLimiter<Context>(httpOptions);

  async function sentinelRateLimit(ctx: Context, next: Next): Promise<void> {
    const verdict = await http.check(ctx);
    if (verdict.decision !== undefined) ctx.state.rateLimit = verdict.decision;
    ctx.set(verdict.headers);
    // Not wrapped: whatever downstream throws is Koa's to handle, exactly as thrown.
    if (verdict.action === 'next') return next();
    if (handler !== undefined && verdict.reason === 'limited' && verdict.decision !== undefined) {
      return handler(ctx, verdict.decision);
    }
    ctx.status = verdict.status;
    ctx.type = 'application/problem+json';
    ctx.body = JSON.stringify(verdict.body);
  }

  return Object.assign(sentinelRateLimit, {
    limiter: http.limiter,
    close: () => http.close(),
  });
}
