// The checks and rules every adapter applies the same way, so the three fail and answer alike.
import {
  type HttpLimiterOptions,
  mergeHttpLimiterOptions,
  type Verdict,
} from './http/http-limiter.ts';
import { HTTP_OPTION_NAMES } from './http/http-options.ts';
import { LIMITER_OPTION_NAMES, type LimiterOptions } from './limiter-options.ts';
import { createRedisClient } from './redis-client.ts';
import { toRedisConnection } from './redis-connection.ts';
import type { Decision } from './types.ts';
import { checkObject, rejectUnknownOptions } from './validation.ts';

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

/** An adapter's options with one Redis client for it and every limiter its routes make. */
export interface SharedConnection<Options> {
  /** The options to build with: `redisUrl` replaced by `redis`, the client built from it. */
  readonly options: Options;
  /** Closes that client, once however often it is called; nothing when none was built. */
  close(): Promise<void>;
}

/**
 * From `redisUrl`, each limiter would build a Redis client, and so each route an adapter limits
 * by its own options would open a connection of its own. The adapter builds the one they share
 * instead, and closes it after them. Options with `redis` or `store` beside `redisUrl`, which
 * the limiter refuses by name, pass as they are, as do options without `redisUrl`.
 */
export function connectOnce<Options extends Pick<LimiterOptions, 'store' | 'redis' | 'redisUrl'>>(
  options: Options,
): SharedConnection<Options> {
  const { redisUrl, redis, store } = options;
  if (redisUrl === undefined || redis !== undefined || store !== undefined) {
    return { options, close: () => Promise.resolve() };
  }
  const client = createRedisClient(redisUrl);
  const { redisUrl: _, ...rest } = options;
  let closed: Promise<void> | undefined;
  return {
    options: { ...rest, redis: client } as Options,
    close: () => {
      closed ??= toRedisConnection(client).close();
      return closed;
    },
  };
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
    verdict.reason !== 'unavailable'
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
