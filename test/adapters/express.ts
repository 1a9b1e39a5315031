// The conformance suite's Express driver: an Express 5 app limited with app.use and route() middleware.
import { createServer } from 'node:http';
import {
  type RateLimitMiddleware,
  type RateLimitOptions,
  rateLimit,
} from '../../packages/express/src/index.ts';
import { answer, express5 } from '../../packages/express/test/apps.ts';
import {
  type AdapterDriver,
  type AppSpec,
  type BuiltApp,
  type RouteSpec,
  served,
} from './driver.ts';
import { closeServer, listen } from './server.ts';

/** The route's handler: its work, then the answer; what the work throws goes to Express. */
function handlerOf(route: RouteSpec): typeof answer {
  const { work } = route;
  if (work === undefined) return answer;
  return (req, res, next) => {
    work().then(() => answer(req, res, next), next);
  };
}

async function build(spec: AppSpec): Promise<BuiltApp> {
  const options: RateLimitOptions = spec.customHandler
    ? {
        ...spec.options,
        handler: (_req, res, _next, decision) => {
          res.status(418).json({ custom: true, policy: decision.policy });
        },
      }
    : spec.options;
  // Closing the app's middleware closes the route middleware its route() made.
  const limit: RateLimitMiddleware = rateLimit(options);

  const app = express5.app();
  app.set('trust proxy', spec.trustProxy ?? true);
  try {
    const routes = spec.routes ?? [];
    // Routes with limits of their own, or none, answer before the app-wide middleware sees them:
    // this is how an Express app gives a route its limit instead of the app's.
    for (const route of routes) {
      if (route.rateLimit === false) app.get(route.path, handlerOf(route));
      else if (route.rateLimit) app.get(route.path, limit.route(route.rateLimit), handlerOf(route));
    }
    app.use(limit);
    app.get('/', answer);
    for (const route of routes) {
      if (route.rateLimit === undefined) app.get(route.path, handlerOf(route));
    }
  } catch (error) {
    await limit.close();
    throw error;
  }

  const server = createServer(app);
  return {
    server,
    listen: () => listen(server),
    async close() {
      await closeServer(server);
      await limit.close();
    },
  };
}

export const driver: AdapterDriver = {
  name: 'express',
  build,
  start: (spec) => build(spec).then(served),
};
