// Public types of @sentinel/fastify, and what the plugin adds to Fastify's own types.
import type { Decision, HttpLimiterOptions, Limiter } from '@sentinel/core';
import type { FastifyReply, FastifyRequest } from 'fastify';

/**
 * Options a route's `config.rateLimit` or `app.rateLimit()` merges over the plugin's. A route that
 * names its own policies (`policies`, `tiers`, or a policy's fields such as `limit` at the top
 * level) or its own `store`/`redis`/`redisUrl` replaces the plugin's rather than combining with
 * them.
 * @example { group: 'search', cost: 5 }
 */
export type RouteRateLimitOptions = HttpLimiterOptions<FastifyRequest, FastifyReply>;

/** The request hooks the plugin can limit in; later ones see more of the request. */
export const SENTINEL_HOOKS = ['onRequest', 'preParsing', 'preValidation', 'preHandler'] as const;
export type SentinelHook = (typeof SENTINEL_HOOKS)[number];

/** Answers a request refused by its limits instead of the problem body; status and headers are set. */
export type RefusalHandler = (
  request: FastifyRequest,
  reply: FastifyReply,
  decision: Decision,
) => void | Promise<void>;

export interface SentinelOptions extends HttpLimiterOptions<FastifyRequest, FastifyReply> {
  /**
   * The hook that limits requests: `'onRequest'` refuses before the body is read.
   * @default 'onRequest'
   */
  hook?: SentinelHook;
  /**
   * Limit every route by these options unless its `config.rateLimit` says otherwise. With
   * `false`, only routes with a `config.rateLimit` object are limited.
   * @default true
   */
  global?: boolean;
  /**
   * Answers a request refused by its limits instead of the problem+json body, and must send the
   * reply. The status (429; 403 past the `ban` count, or for a cost larger than a limit) and the RateLimit headers (and
   * `Retry-After` with a 429) are already set. A 401 for a rejected API key and a 503 when failing
   * closed keep their problem bodies.
   * @example (request, reply, decision) => reply.send({ error: 'slow down', policy: decision.policy })
   * @default undefined (a problem+json body)
   */
  handler?: RefusalHandler;
}

/**
 * The plugin's limiters, as `app.sentinel`: to `peek` at or `reset` an identity in the very
 * budgets requests count against, over the same store, without building a limiter of your own.
 * @example await app.sentinel.limiter.reset(`tenant:${tenantId}`)
 */
export interface SentinelLimiters {
  /**
   * The limiter of the plugin's own options, which every route without options of its own
   * counts against. With `global: false` it is built when first read, and throws then the
   * TypeError that options without policies get.
   */
  readonly limiter: Limiter;
  /**
   * Each route group's limiter, by group: the limiter of the first route (`config.rateLimit`
   * or `app.rateLimit()`) that named the group, or of the plugin's own `group`. Routes of one
   * group share one budget, so any of them reads it. Filled as routes are added: complete once
   * the app is ready.
   */
  readonly groups: ReadonlyMap<string, Limiter>;
}

/** A hook for a route's `onRequest` or `preHandler`, made by `app.rateLimit()`. */
export type RateLimitHook = (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>;

declare module 'fastify' {
  interface FastifyContextConfig {
    /** This route's options over the plugin's, or false for no limit. */
    rateLimit?: RouteRateLimitOptions | false;
  }
  interface FastifyInstance {
    /**
     * A hook limiting the routes that use it by `options` merged over the plugin's. A route the
     * plugin limits as well counts against both: give it `config: { rateLimit: false }`.
     * @example app.get('/export', { preHandler: app.rateLimit({ cost: 10 }) }, handler)
     */
    rateLimit(options?: RouteRateLimitOptions): RateLimitHook;
    /** The plugin's limiters, for `peek` and `reset`. */
    readonly sentinel: SentinelLimiters;
  }
  interface FastifyRequest {
    /**
     * The decision of the last limit this request went through; undefined when that one made
     * none (skipped or allow-listed) or none applied.
     */
    rateLimit: Decision | undefined;
  }
}
