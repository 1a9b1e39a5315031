// The checks and rules every adapter applies the same way, so the three fail and answer alike.

import { LIMITER_OPTION_NAMES } from '../limiter/options.ts';
import { connectOnce, type SharedConnection } from '../limiter/shared-connection.ts';
import type { Decision } from '../shared/types.ts';
import { checkObject, rejectUnknownOptions } from '../shared/validation.ts';
import {
  createHttpLimiter,
  type HttpLimiter,
  type HttpLimiterOptions,
  mergeHttpLimiterOptions,
  type Verdict,
} from './http-limiter.ts';
import { HTTP_OPTION_NAMES } from './http-options.ts';
import type { RequestLike } from './identity.ts';

/**
 * The options an adapter was given, checked to be an object. None (undefined or null) counts as
 * empty, as Fastify makes it for a plugin, so all three adapters then fail alike, naming what is
 * missing; and a non-object fails here, by name, rather than deep in a destructuring. With `own`,
 * the adapter's own option names (such as `handler`), every name is checked here, so that a
 * misspelt adapter option gets the name it was likely meant to be, as a core option does.
 */
export function adapterOptions<T extends object>(
  options: T | undefined,
  option = 'options',
  own?: readonly string[],
): T {
  if (options === undefined || options === null) return {} as T;
  checkObject(options, option, "an object such as { limit: 100, window: '1m' }");
  if (own !== undefined) {
    const known = new Set([...LIMITER_OPTION_NAMES, ...HTTP_OPTION_NAMES, ...own]);
    rejectUnknownOptions(options, known, '@sentinel/core');
  }
  return options;
}

/**
 * An adapter's HTTP limiter, over the one Redis client built from `redisUrl` for it and every
 * limiter its `route()` makes (see connectOnce), which is closed again if the options prove bad.
 * The adapter's own `handler` is left out: it is the adapter's to apply.
 */
export function adapterLimiter<
  Req extends RequestLike,
  Res,
  Options extends HttpLimiterOptions<Req, Res> & { handler?: unknown },
>(given: Options): { http: HttpLimiter<Req, Res>; connection: SharedConnection<Options> } {
  const connection = connectOnce(given);
  const { handler: _, ...options } = connection.options;
  try {
    return { http: createHttpLimiter<Req, Res>(options), connection };
  } catch (error) {
    void connection.close();
    throw error;
  }
}

/** A refusal whose decision a custom `handler` may answer. */
export type HandledRefusal = Extract<Verdict, { action: 'respond' }> & { decision: Decision };

/**
 * Whether a custom `handler` answers this verdict instead of Sentinel: a refusal by the limits
 * (for now, past the `ban` count, or for a cost no wait admits). A rejected API key and failing closed keep their
 * problem bodies, since neither is about the caller's budget.
 */
export function handlerAnswers(verdict: Verdict): verdict is HandledRefusal {
  return (
    verdict.action === 'respond' &&
    verdict.decision !== undefined &&
    verdict.reason !== 'unauthorized' &&
    verdict.reason !== 'unavailable' &&
    verdict.reason !== 'shed'
  );
}

/** The `route()` and `close()` an Express or Koa middleware carries. */
export interface RouteLayering<Options, Middleware> {
  /** A middleware for one route: the route's options layered over the app's, `handler` included. */
  route(own: Partial<Options>): Middleware;
  /** Closes the app's limiter and every middleware `route()` made. */
  close(): Promise<void>;
}

/**
 * Per-route layering for middleware adapters, with core's merge: a route naming its own policies
 * or store replaces the app's, and one naming its own `handler` answers with it. `connection`,
 * the client the app's options share with its routes, is closed after every one of them.
 */
export function routeLayering<
  Options extends object,
  Middleware extends { close(): Promise<void> },
>(
  options: Options,
  build: (options: Options) => Middleware,
  closeLimiter: () => Promise<void>,
  connection?: SharedConnection<Options>,
): RouteLayering<Options, Middleware> {
  const routes: Middleware[] = [];
  return {
    route(own) {
      const layered = mergeHttpLimiterOptions(
        options as HttpLimiterOptions<never>,
        adapterOptions(own as object, 'route options'),
      );
      const middleware = build(layered as Options);
      routes.push(middleware);
      return middleware;
    },
    async close() {
      await Promise.all([closeLimiter(), ...routes.map((middleware) => middleware.close())]);
      await connection?.close();
    },
  };
}
