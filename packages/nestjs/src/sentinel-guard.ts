// SentinelGuard: finds the handler's limiter, asks core for a verdict, and admits, or throws the refusal in the context's own way.

import type { CanActivate, ExecutionContext } from '@nestjs/common';
import { GUARDS_METADATA } from '@nestjs/common/constants.js';
import type { Reflector } from '@nestjs/core';
import type { Verdict } from '@sentinel/core/internal';
import { type Exchange, exchangeOf } from './exchange.ts';
import {
  RATE_LIMIT_METADATA,
  type RouteRateLimitOptions,
  SKIP_RATE_LIMIT_METADATA,
} from './options.ts';
import { RateLimitException } from './rate-limit-exception.ts';
import type { RouteLimiter, SentinelService } from './sentinel-service.ts';
import { type HeldSlots, holdSlots } from './slots.ts';

type Refusal = Extract<Verdict, { action: 'respond' }>;

/**
 * One verdict per request and limiter, kept on the request (or a WebSocket message's arguments):
 * a GraphQL operation runs the guard once per top-level field, and a guard bound both globally
 * and on a route runs twice; each request is counted once. A property rather than a WeakMap
 * keyed by short-lived requests, which doubled the garbage each request left.
 */
const VERDICTS = Symbol('@sentinel/nestjs:verdicts');

/** The guard's calls so far on one request (or message), by handler. */
const CALLS = Symbol('@sentinel/nestjs:calls');

interface Counted {
  [VERDICTS]?: Map<RouteLimiter, Promise<Verdict>>;
  [CALLS]?: Map<object, number>;
}

/** What a handler's metadata says, read once: its metadata is fixed once its class is declared. */
interface Route {
  skip: boolean;
  limiter: RouteLimiter;
  /** How many times it binds SentinelGuard itself, with `@UseGuards()` on it or its class. */
  ownBindings: number;
}

function ownBindingsOf(handler: object, type: object): number {
  const guards = [handler, type].flatMap(
    (target) => (Reflect.getMetadata(GUARDS_METADATA, target) as unknown[] | undefined) ?? [],
  );
  return guards.filter(
    (guard) =>
      guard === SentinelGuard ||
      guard instanceof SentinelGuard ||
      (typeof guard === 'function' && guard.prototype instanceof SentinelGuard),
  ).length;
}

/** WsException, loaded on the first refused message: @nestjs/websockets is there only in apps with gateways. */
let wsException: Promise<new (error: object) => Error> | undefined;

/**
 * Limits what it guards: bind it for the whole app with `{ provide: APP_GUARD, useClass:
 * SentinelGuard }`, or on a controller, resolver, gateway or handler with
 * `@UseGuards(SentinelGuard)`. Each handler is limited by the module's options, with its class's
 * and its own `@RateLimit()` layered over them, unless `@SkipRateLimit()` skips it.
 */
export class SentinelGuard implements CanActivate {
  /** By handler, then class: a method a subclass inherits is another route. */
  readonly #routes = new WeakMap<object, Map<object, Route>>();

  constructor(
    private readonly sentinel: SentinelService,
    private readonly reflector: Reflector,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const route = this.routeOf(context);
    if (route.skip) return true;
    const exchange = exchangeOf(context);
    // Microservice transports have no client to count.
    if (exchange === undefined) return true;
    if (route.ownBindings > 0 && this.defersToOwnBinding(context, exchange, route.ownBindings)) {
      return true;
    }
    const { limiter } = route;
    const verdict = await this.verdictOnce(limiter, exchange, context);
    if (exchange.setHeader) {
      for (const [name, value] of Object.entries(verdict.headers)) exchange.setHeader(name, value);
    }
    if (verdict.action === 'next') {
      if (exchange.kind !== 'ws') exchange.request.rateLimit = verdict.decision;
      return true;
    }
    throw await refusalOf(verdict, exchange);
  }

  /**
   * Whether this call is the global guard's on a handler that binds the guard itself: the global
   * one lets it pass, so that the handler is limited where it asked, after the guards it lists
   * first (an auth guard that finds the user). Nest runs global guards first, then the class's,
   * then the handler's, once per call (per top-level field of a GraphQL operation).
   */
  private defersToOwnBinding(context: ExecutionContext, exchange: Exchange, own: number): boolean {
    if (!this.sentinel.boundGlobally) return false;
    const counted = countedOn(exchange, context);
    counted[CALLS] ??= new Map();
    const byHandler = counted[CALLS];
    const handler = context.getHandler();
    const call = byHandler.get(handler) ?? 0;
    byHandler.set(handler, call + 1);
    return call % (own + 1) === 0;
  }

  private routeOf(context: ExecutionContext): Route {
    const handler = context.getHandler();
    const type = context.getClass();
    let byClass = this.#routes.get(handler);
    if (byClass === undefined) {
      byClass = new Map();
      this.#routes.set(handler, byClass);
    }
    let route = byClass.get(type);
    if (route === undefined) {
      const options = (target: object) =>
        this.reflector.get<RouteRateLimitOptions | undefined>(RATE_LIMIT_METADATA, target as never);
      route = {
        skip:
          this.reflector.getAllAndOverride<boolean>(SKIP_RATE_LIMIT_METADATA, [handler, type]) ===
          true,
        limiter: this.sentinel.limiterFor(options(type), options(handler)),
        ownBindings: ownBindingsOf(handler, type),
      };
      byClass.set(type, route);
    }
    return route;
  }

  private verdictOnce(
    limiter: RouteLimiter,
    exchange: Exchange,
    context: ExecutionContext,
  ): Promise<Verdict> {
    const counted = countedOn(exchange, context);
    counted[VERDICTS] ??= new Map();
    const byLimiter = counted[VERDICTS];
    let verdict = byLimiter.get(limiter);
    if (verdict === undefined) {
      // Kept as a promise, one verdict per request and limiter, whichever way it came.
      verdict = Promise.resolve(limiter.check(exchange.request)).then((decided) => {
        if (decided.action === 'next') follow(limiter, decided, exchange, context);
        return decided;
      });
      byLimiter.set(limiter, verdict);
    }
    return verdict;
  }
}

/** A WebSocket message has no request object of its own: its arguments stand for it. */
function countedOn(exchange: Exchange, context: ExecutionContext): Counted {
  return (exchange.kind === 'ws' ? context.getArgs() : exchange.request) as Counted;
}

/**
 * Counts an admitted request by its outcome when asked to, and releases its concurrency slots
 * when its response closes; a WebSocket message's, when its handler is done (see slots.ts).
 */
function follow(
  limiter: RouteLimiter,
  verdict: Verdict,
  exchange: Exchange,
  context: ExecutionContext,
) {
  if (exchange.raw !== undefined) {
    limiter.countByOutcome(verdict, exchange.request, exchange.response, exchange.raw);
  } else if (limiter.follows(verdict)) {
    const held: HeldSlots = holdSlots(context.getArgs());
    limiter.releaseSlots(verdict, exchange.request, held);
  }
}

/** The refusal to throw: an HttpException over HTTP and GraphQL, a WsException to a WebSocket. */
async function refusalOf(verdict: Refusal, exchange: Exchange): Promise<Error> {
  if (exchange.kind === 'ws') {
    wsException ??= import('@nestjs/websockets').then((module) => module.WsException);
    const WsException = await wsException;
    return new WsException({ ...verdict.body, headers: verdict.headers });
  }
  // The body is problem+json; a GraphQL response stays the GraphQL server's JSON.
  if (exchange.kind === 'http') exchange.setHeader?.('Content-Type', 'application/problem+json');
  const exception = new RateLimitException(
    verdict.body,
    verdict.status,
    verdict.reason,
    verdict.decision,
    verdict.headers,
  );
  // Apollo Server sends an error's `extensions.http.headers` with its response: Retry-After
  // reaches the client even where the guard has no response to write to (Fastify's default
  // GraphQL context holds no reply). Not enumerable, so that it stays out of logs and filters.
  if (exchange.kind === 'graphql' && exchange.overHttp) {
    const headers = new Map(Object.entries(verdict.headers));
    Object.defineProperty(exception, 'extensions', { value: { http: { headers } } });
  }
  return exception;
}
