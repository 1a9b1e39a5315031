// The Fastify plugin: one request hook limits each route by its own options or the plugin's.
import { createHttpLimiter, type HttpLimiter, type Limiter, type Verdict } from '@sentinel/core';
import {
  adapterOptions,
  checkFunction,
  checkObject,
  checkOneOf,
  connectOnce,
  fail,
  handlerAnswers,
  mergeHttpLimiterOptions,
} from '@sentinel/core/internal';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import {
  type RateLimitHook,
  type RouteRateLimitOptions,
  SENTINEL_HOOKS,
  type SentinelLimiters,
  type SentinelOptions,
} from './types.ts';

type Options = RouteRateLimitOptions;
type RouteLimiter = HttpLimiter<FastifyRequest, FastifyReply>;

/** The options of the plugin alone, beside core's: a misspelling of one is named too. */
const PLUGIN_ONLY = ['hook', 'global', 'handler'] satisfies readonly Exclude<
  keyof SentinelOptions,
  keyof Options
>[];

const plugin: FastifyPluginAsync<SentinelOptions> = async function sentinel(fastify, options) {
  const {
    hook = 'onRequest',
    global = true,
    handler,
    ...given
  } = adapterOptions(options, 'options', PLUGIN_ONLY);
  checkOneOf(hook, SENTINEL_HOOKS, 'hook');
  if (typeof global !== 'boolean') fail('global', `must be true or false, got ${String(global)}`);
  if (handler !== undefined) checkFunction(handler, 'handler');
  // From `redisUrl`, one client for every route's limiter, closed after all of them.
  // The app's logger, the parent of every request.log, hears of store and breaker transitions.
  const connection = connectOnce<Options>({ logger: fastify.log, ...given });
  const base = connection.options;
  const limiters = new WeakMap<Options, RouteLimiter>();
  const built: RouteLimiter[] = [];
  const groups = new Map<string, Limiter>();

  /** One limiter per options object, so a GET and its HEAD route share theirs. */
  function build(own: Options): RouteLimiter {
    let limiter = limiters.get(own);
    if (limiter) return limiter;
    const merged = own === base ? base : mergeHttpLimiterOptions(base, own);
    limiter = createHttpLimiter(merged);
    limiters.set(own, limiter);
    built.push(limiter);
    if (merged.group !== undefined && !groups.has(merged.group)) {
      groups.set(merged.group, limiter.limiter);
    }
    return limiter;
  }

  function routeLimiter(own: Options | false | undefined): RouteLimiter | undefined {
    if (own === undefined) return global ? build(base) : undefined;
    if (own === false) return undefined;
    checkObject(own, 'config.rateLimit', 'an object or false');
    return build(own);
  }

  /** Passes a request on: the decision on it, its headers, and its outcome followed. */
  function pass(
    limiter: RouteLimiter,
    request: FastifyRequest,
    reply: FastifyReply,
    verdict: Verdict,
  ) {
    request.rateLimit = verdict.decision;
    reply.headers(verdict.headers);
    limiter.countByOutcome(verdict, request, reply, reply.raw);
  }

  async function limit(
    limiter: RouteLimiter,
    request: FastifyRequest,
    reply: FastifyReply,
    checked = limiter.check(request),
  ) {
    const verdict = await checked;
    if (verdict.action === 'next') {
      pass(limiter, request, reply, verdict);
      return undefined;
    }
    request.rateLimit = verdict.decision;
    reply.headers(verdict.headers);
    reply.code(verdict.status);
    if (handler && handlerAnswers(verdict)) {
      await handler(request, reply, verdict.decision);
    } else {
      reply.type('application/problem+json').send(verdict.body);
    }
    // A reply settles once it is written: awaiting it keeps Fastify from running later hooks
    // or the route while async onSend hooks are still at work.
    return reply;
  }

  fastify.addHook('onClose', async function closeSentinel() {
    await Promise.all(built.map((limiter) => limiter.close()));
    await connection.close();
  });
  try {
    if (global) build(base);
  } catch (error) {
    // The app never starts, and may never be closed: the client is closed here.
    void connection.close();
    throw error;
  }
  const limitersOf: SentinelLimiters = {
    get limiter() {
      return build(base).limiter;
    },
    groups,
  };
  fastify.decorate('sentinel', limitersOf);
  // Decorated up front, so every request has the property: undefined until a limit decides.
  fastify.decorateRequest('rateLimit', undefined);
  fastify.decorate('rateLimit', function rateLimit(own?: Options): RateLimitHook {
    const limiter = build(own === undefined ? base : adapterOptions(own, 'app.rateLimit options'));
    return function sentinelRouteHook(request, reply) {
      return limit(limiter, request, reply);
    };
  });
  // Builds each route's limiter as the route is added, so that bad options fail at startup.
  // Routes added before the plugin never pass here: theirs is built at their first request.
  fastify.addHook('onRoute', function sentinelRoute(route) {
    routeLimiter(route.config?.rateLimit);
  });
  // Fastify gives this hook to the context and to its child contexts, older ones included; each
  // request finds its route's limiter from the route's config.
  // Not async: a request passed on at once (a quota lease's decision) goes on through `done`
  // without a promise turn; any other is answered by `limit`'s promise, which Fastify awaits.
  fastify.addHook(hook as 'onRequest', function sentinelHook(request, reply, done) {
    const limiter = routeLimiter(request.routeOptions.config?.rateLimit);
    if (limiter === undefined) return done();
    const checked = limiter.check(request);
    if (checked instanceof Promise || checked.action !== 'next') {
      return limit(limiter, request, reply, checked);
    }
    pass(limiter, request, reply, checked);
    done();
  });
};

/**
 * Rate limits every route, or the routes whose `config.rateLimit` asks for it.
 * @example await app.register(sentinel, { tiers: { FREE: { limit: 10, window: '1m' } }, redis })
 */
export const sentinel = fp(plugin, { fastify: '5.x', name: '@sentinel/fastify' });
