// The conformance suite's Express driver: an Express 5 app limited with app.use and per-route middleware.

import { mergeHttpLimiterOptions } from '@sentinel/core';
import {
  type RateLimitMiddleware,
  type RateLimitOptions,
  rateLimit,
} from '../../packages/express/src/index.ts';
import { answer, express5, serve } from '../../packages/express/test/apps.ts';
import type { AdapterDriver, AppSpec, RunningApp } from './driver.ts';

async function start(spec: AppSpec): Promise<RunningApp> {
  const limiters: RateLimitMiddleware[] = [];
  const closeLimiters = () => Promise.all(limiters.map((limiter) => limiter.close()));
  function limit(options: RateLimitOptions): RateLimitMiddleware {
    const middleware = rateLimit(
      spec.customHandler
        ? {
            ...options,
            handler: (_req, res, _next, decision) => {
              res.status(418).json({ custom: true, policy: decision.policy });
            },
          }
        : options,
    );
    limiters.push(middleware);
    return middleware;
  }

  const app = express5.app();
  app.set('trust proxy', spec.trustProxy ?? true);
  try {
    const routes = spec.routes ?? [];
    // Routes with limits of their own answer before the app-wide middleware sees them.
    for (const route of routes) {
      if (route.rateLimit === false) app.get(route.path, answer);
      else if (route.rateLimit) {
        app.get(route.path, limit(mergeHttpLimiterOptions(spec.options, route.rateLimit)), answer);
      }
    }
    app.use(limit(spec.options));
    app.get('/', answer);
    for (const route of routes) if (route.rateLimit === undefined) app.get(route.path, answer);
  } catch (error) {
    await closeLimiters();
    throw error;
  }

  const served = await serve(app);
  return {
    url: served.url,
    async close() {
      await served.close();
      await closeLimiters();
    },
  };
}

export const driver: AdapterDriver = { name: 'express', start };
