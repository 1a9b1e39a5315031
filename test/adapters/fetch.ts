// The conformance suite's fetch driver: one fetch API handler per path, each wrapped with withRateLimit, served on Node by @hono/node-server.
import type { Decision } from '@sentinel/core';
import { mergeHttpLimiterOptions } from '@sentinel/core/internal';
import {
  decisionOf,
  type RateLimitedHandler,
  type WithRateLimitOptions,
  withRateLimit,
} from '../../packages/fetch/src/index.ts';
import { createAdaptorServer } from '../../packages/hono/test/apps.ts';
import {
  type AdapterDriver,
  type AppSpec,
  type BuiltApp,
  type RouteSpec,
  served,
} from './driver.ts';
import { closeServer, listen } from './server.ts';

/** A path's handler: its work, then the decision it was passed with; what the work throws is the server's to answer. */
function handlerOf(route?: RouteSpec) {
  return async function answer(request: Request): Promise<Response> {
    await route?.work?.();
    return Response.json({ ok: true, rateLimit: decisionOf(request) ?? null });
  };
}

async function build(spec: AppSpec): Promise<BuiltApp> {
  const options: WithRateLimitOptions = {
    ...spec.options,
    // The fetch API has no trust-proxy setting of its own: the wrapper's option stands in for it.
    trustProxy: spec.trustProxy ?? true,
    ...(spec.customHandler && {
      handler: (_req: unknown, decision: Decision) =>
        Response.json({ custom: true, policy: decision.policy }, { status: 418 }),
    }),
  };
  const wrapped: RateLimitedHandler[] = [];
  const wrap = (route: RouteSpec | undefined, own: WithRateLimitOptions) => {
    const handler = withRateLimit(handlerOf(route), own);
    wrapped.push(handler);
    return handler;
  };
  const closeAll = () => Promise.all(wrapped.map((handler) => handler.close()));
  const byPath = new Map<string, (request: Request, ...rest: unknown[]) => Promise<Response>>();
  try {
    const app = wrap(undefined, options);
    byPath.set('/', app);
    for (const route of spec.routes ?? []) {
      const own = route.rateLimit;
      // Each path is wrapped by itself, and paths with the same options count in the same
      // budget through the store, as a user's route handlers do; its own options are layered
      // over the app's as route() layers them in the other adapters.
      if (own === false) byPath.set(route.path, handlerOf(route));
      else if (own === undefined) byPath.set(route.path, wrap(route, options));
      else
        byPath.set(
          route.path,
          wrap(route, mergeHttpLimiterOptions(options, own) as typeof options),
        );
    }
  } catch (error) {
    await closeAll();
    throw error;
  }
  const server = createAdaptorServer({
    fetch: (request: Request, env: unknown) => {
      const handler = byPath.get(new URL(request.url).pathname);
      return handler ? handler(request, env) : new Response('not found', { status: 404 });
    },
  }) as BuiltApp['server'];
  return {
    server,
    listen: () => listen(server),
    async close() {
      await closeServer(server);
      await closeAll();
    },
  };
}

export const driver: AdapterDriver = {
  name: 'fetch',
  build,
  start: (spec) => build(spec).then(served),
};
