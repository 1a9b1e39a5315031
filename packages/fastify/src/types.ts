// Public types of @sentinel/fastify, and what the plugin adds to Fastify's own types.
import type { Decision, HttpLimiterOptions } from '@sentinel/core';
import type { FastifyReply, FastifyRequest } from 'fastify';

/**
 * Options a route's `config.rateLimit` or `app.rateLimit()` merges over the plugin's. A route that
 * names its own policies (`policies`, `tiers`, or `limit`/`window`/`algorithm`) or its own
 * `store`/`redis` replaces the plugin's rather than combining with them.
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
  }
  interface FastifyRequest {
    /**
     * The decision of the last limit this request went through; undefined when that one made
     * none (skipped or allow-listed) or none applied.
     */
    rateLimit: Decision | undefined;
  }
}
