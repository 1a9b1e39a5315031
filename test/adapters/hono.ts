// The conformance suite's Hono driver: a Hono app on @hono/node-server, limited with app.use-style route middleware and route().
import type { Decision } from '@sentinel/core';
import {
  type RateLimitMiddleware,
  type RateLimitOptions,
  rateLimit,
} from '../../packages/hono/src/index.ts';
import { type Context, createAdaptorServer, Hono } from '../../packages/hono/test/apps.ts';
import {
  type AdapterDriver,
  type AppSpec,
  type BuiltApp,
  type RouteSpec,
  served,
} from './driver.ts';
import { closeServer, listen } from './server.ts';

type Env = { Variables: { rateLimit: Decision | undefined } };

/** The route's handler: its work, then the decision it was passed with; what the work throws goes to Hono's onError. */
function handlerOf(route?: RouteSpec) {
  return async function answer(c: Context<Env>) {
    await route?.work?.();
    return c.json({ ok: true, rateLimit: c.get('rateLimit') ?? null });
  };
}

async function build(spec: AppSpec): Promise<BuiltApp> {
  const { trustProxy = true } = spec;
  const options: RateLimitOptions<Env> = {
    ...spec.options,
    // Hono has no trust-proxy setting of its own: the adapter's option stands in for it.
    trustProxy,
    ...(spec.customHandler && {
      handler: (c: Context<Env>, decision: Decision) =>
        c.json({ custom: true, policy: decision.policy }, 418),
    }),
  };
  // Closing the app's middleware closes the route middleware its route() made.
  const limit: RateLimitMiddleware = rateLimit(options);
  const app = new Hono<Env>();
  try {
    app.get('/', limit, handlerOf());
    for (const route of spec.routes ?? []) {
      const own = route.rateLimit;
      if (own === false) app.get(route.path, handlerOf(route));
      else app.get(route.path, own === undefined ? limit : limit.route(own), handlerOf(route));
    }
  } catch (error) {
    await limit.close();
    throw error;
  }
  const server = createAdaptorServer({ fetch: app.fetch });
  return {
    server: server as BuiltApp['server'],
    listen: () => listen(server as BuiltApp['server']),
    async close() {
      await closeServer(server as BuiltApp['server']);
      await limit.close();
    },
  };
}

export const driver: AdapterDriver = {
  name: 'hono',
  build,
  start: (spec) => build(spec).then(served),
};
