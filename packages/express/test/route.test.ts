// limit.route() on Express 5 and 4: a route's options layered over the app's, in place of its limit or on top.
import type { Express } from 'express';
import { afterEach, describe, expect, it } from 'vitest';
import type { RouteBody } from '../../../test/adapters/driver.ts';
import { getMany as replies } from '../../../test/adapters/replies.ts';
import { uniquePrefix } from '../../../test/harness/clients.ts';
import { MemoryStore, type RateLimitMiddleware, rateLimit } from '../src/index.ts';
import { answer, EXPRESS_VERSIONS, type ExpressVersion, startApp } from './apps.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** GETs `url` `times` over, reading the remaining count `answer` shows. */
const getMany = (url: string, times: number) =>
  replies(url, times, (body) => (body as RouteBody).rateLimit?.remaining);

describe.each(EXPRESS_VERSIONS)('route() on $name', (version: ExpressVersion) => {
  /** The app-wide middleware: 3 a minute, on a store and prefix of its own. */
  function appLimit(): RateLimitMiddleware {
    const store = new MemoryStore();
    const limit = rateLimit({
      store,
      prefix: uniquePrefix('express-route'),
      limit: 3,
      window: '1m',
    });
    cleanups.push(() => store.close());
    // Closing the app's middleware closes those its route() made.
    cleanups.push(() => limit.close());
    return limit;
  }

  const start = (build: (app: Express) => void) => startApp(version, build, cleanups);

  it("limits a route mounted before the app's middleware by its own options instead", async () => {
    const limit = appLimit();
    const url = await start((app) => {
      app.get('/before', limit.route({ limit: 1 }), answer);
      app.use(limit);
      app.get('/', answer);
    });
    const own = await getMany(`${url}/before`, 2);
    expect(own.map((r) => r.status)).toEqual([200, 429]);
    expect(own[0]?.policy).toBe('"1-per-1m";q=1;w=60');
    // The app's budget is whole: the route was never counted against it.
    expect((await getMany(`${url}/`, 4)).map((r) => r.status)).toEqual([200, 200, 200, 429]);
  });

  it("counts a route mounted after the app's middleware against both", async () => {
    const limit = appLimit();
    const url = await start((app) => {
      app.use(limit);
      app.get('/after', limit.route({ group: 'after', limit: 5 }), answer);
    });
    const replies = await getMany(`${url}/after`, 4);
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 429]);
    // The route sees its own decision, the last one made; the app's limit refuses the fourth.
    expect(replies.slice(0, 3).map((r) => r.remaining)).toEqual([4, 3, 2]);
    expect(replies[3]?.policy).toBe('"3-per-1m";q=3;w=60');
  });

  it("keeps the app's policies and budget for a route that changes only its cost", async () => {
    const limit = appLimit();
    const url = await start((app) => {
      app.get('/heavy', limit.route({ cost: 2 }), answer);
      app.use(limit);
      app.get('/', answer);
    });
    const [heavy] = await getMany(`${url}/heavy`, 1);
    expect(heavy).toEqual({ status: 200, policy: '"3-per-1m";q=3;w=60', remaining: 1 });
    // Same prefix and policies, no group: the route and the app draw from one budget.
    expect((await getMany(`${url}/`, 2)).map((r) => r.status)).toEqual([200, 429]);
  });

  it('answers with the route handler, or else with the handler of the app', async () => {
    const store = new MemoryStore();
    cleanups.push(() => store.close());
    const limit = rateLimit({
      store,
      prefix: uniquePrefix('express-route'),
      limit: 1,
      window: '1m',
      handler: (_req, res) => void res.status(429).json({ from: 'app' }),
    });
    cleanups.push(() => limit.close());
    const url = await start((app) => {
      app.get('/inherits', limit.route({ group: 'inherits' }), answer);
      app.get(
        '/own',
        limit.route({
          group: 'own',
          handler: (_req, res) => void res.status(429).json({ from: 'route' }),
        }),
        answer,
      );
    });
    for (const [path, from] of [
      ['/inherits', 'app'],
      ['/own', 'route'],
    ] as const) {
      await fetch(`${url}${path}`);
      const refused = await fetch(`${url}${path}`);
      expect(refused.status).toBe(429);
      expect(await refused.json()).toEqual({ from });
    }
  });
});
