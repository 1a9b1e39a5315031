// The conformance suite's Koa app: a path switch for routing, one rateLimit middleware per route budget.
import { type Decision, mergeHttpLimiterOptions } from '@sentinel/core';
import { type RateLimitMiddleware, type RateLimitOptions, rateLimit } from '@sentinel/koa';
// Koa resolves from packages/koa, which depends on it; the root does not.
import { Koa, serve } from '../../packages/koa/test/apps.ts';
import type { AdapterDriver, AppSpec, RunningApp } from './driver.ts';

export const driver: AdapterDriver = {
  name: 'koa',
  async start({
    options,
    routes = [],
    trustProxy = true,
    customHandler = false,
  }: AppSpec): Promise<RunningApp> {
    const limiters: RateLimitMiddleware[] = [];
    function limited(routeOptions: RateLimitOptions): RateLimitMiddleware {
      const handler = (ctx: Koa.Context, decision: Decision) => {
        ctx.status = 418;
        ctx.body = { custom: true, policy: decision.policy };
      };
      const middleware = rateLimit(customHandler ? { ...routeOptions, handler } : routeOptions);
      limiters.push(middleware);
      return middleware;
    }
    // Each path's limiter: the app's, its own, or null for none.
    const appLimiter = limited(options);
    const byPath = new Map<string, RateLimitMiddleware | null>([['/', appLimiter]]);
    for (const route of routes) {
      const own = route.rateLimit;
      byPath.set(
        route.path,
        own === undefined
          ? appLimiter
          : own === false
            ? null
            : limited(mergeHttpLimiterOptions(options, own)),
      );
    }

    const app = new Koa();
    app.proxy = trustProxy;
    app.use(async function route(ctx, next) {
      const limiter = byPath.get(ctx.path);
      if (ctx.method !== 'GET' || limiter === undefined) return next();
      const answer = async () => {
        ctx.body = { ok: true, rateLimit: ctx.state.rateLimit ?? null };
      };
      return limiter === null ? answer() : limiter(ctx, answer);
    });
    const served = await serve(app);
    return {
      url: served.url,
      async close() {
        await served.close();
        await Promise.all(limiters.map((limiter) => limiter.close()));
      },
    };
  },
};
