// The conformance suite's Koa app: a path switch for routing, the app's middleware or a route() of it per path.
import { createServer } from 'node:http';
import type { Decision } from '@sentinel/core';
import { type RateLimitMiddleware, type RateLimitOptions, rateLimit } from '@sentinel/koa';
// Koa resolves from packages/koa, which depends on it; the root does not.
import { Koa } from '../../packages/koa/test/apps.ts';
import { type AdapterDriver, type AppSpec, type BuiltApp, served } from './driver.ts';
import { closeServer, listen } from './server.ts';

export const driver: AdapterDriver = {
  name: 'koa',
  start: (spec) => driver.build(spec).then(served),
  async build({
    options,
    routes = [],
    trustProxy = true,
    customHandler = false,
  }: AppSpec): Promise<BuiltApp> {
    const handler = (ctx: Koa.Context, decision: Decision) => {
      ctx.status = 418;
      ctx.body = { custom: true, policy: decision.policy };
    };
    const appOptions: RateLimitOptions = customHandler ? { ...options, handler } : options;
    // Closing the app's middleware closes the route middleware its route() made.
    const appLimiter = rateLimit(appOptions);
    // Each path's middleware, as a router would mount it: the app's, a route() of it, or none.
    const byPath = new Map<string, RateLimitMiddleware | null>([['/', appLimiter]]);
    const work = new Map(routes.map((route) => [route.path, route.work]));
    try {
      for (const route of routes) {
        const own = route.rateLimit;
        byPath.set(
          route.path,
          own === undefined ? appLimiter : own === false ? null : appLimiter.route(own),
        );
      }
    } catch (error) {
      await appLimiter.close();
      throw error;
    }

    const app = new Koa();
    app.proxy = trustProxy !== false;
    // Koa trusts every hop unless told how many proxies there are.
    if (trustProxy === 'loopback') app.maxIpsCount = 1;
    app.use(async function route(ctx, next) {
      const limiter = byPath.get(ctx.path);
      if (ctx.method !== 'GET' || limiter === undefined) return next();
      const answer = async () => {
        await work.get(ctx.path)?.();
        ctx.body = { ok: true, rateLimit: ctx.state.rateLimit ?? null };
      };
      return limiter === null ? answer() : limiter(ctx, answer);
    });
    const server = createServer(app.callback());
    return {
      server,
      listen: () => listen(server),
      async close() {
        await closeServer(server);
        await appLimiter.close();
      },
    };
  },
};
