// limit.route() on Koa 3 and 2: a route's options layered over the app's, in place of its limit or on top.
import type Koa from 'koa';
import { describe, expect, it } from 'vitest';
import { getMany as replies } from '../../../test/adapters/replies.ts';
import { uniquePrefix } from '../../../test/harness/clients.ts';
import { type RateLimitMiddleware, type RateLimitOptions, rateLimit } from '../src/index.ts';
import { KOA_VERSIONS, serve } from './apps.ts';
import { closeLater } from './stores.ts';

/** GETs `url` `times` over, reading the remaining count `answer` shows. */
const getMany = (url: string, times: number) =>
  replies(url, times, (body) => (body as { remaining?: number }).remaining);

/** What every route answers: the remaining count of the decision it was shown. */
async function answer(ctx: Koa.Context): Promise<void> {
  ctx.body = { remaining: ctx.state.rateLimit?.remaining };
}

describe.each(KOA_VERSIONS)('route() on %s', (_, KoaApp) => {
  /** The app-wide middleware: 3 a minute, under a prefix of its own; closing it closes its routes. */
  function appLimit(options: Partial<RateLimitOptions> = {}): RateLimitMiddleware {
    const prefix = uniquePrefix('koa-route');
    return closeLater(rateLimit({ prefix, limit: 3, window: '1m', ...options }));
  }

  /** Serves an app of `stack` then a final answer, on a free port. */
  async function start(
    stack: Array<(ctx: Koa.Context, next: Koa.Next) => Promise<unknown>>,
  ): Promise<string> {
    const app = new KoaApp();
    for (const middleware of stack) app.use(middleware);
    app.use(answer);
    return closeLater(await serve(app as Koa)).url;
  }

  /** Middleware that runs `route` for `path` alone and answers it, as a router would. */
  function at(path: string, route: RateLimitMiddleware) {
    return async (ctx: Koa.Context, next: Koa.Next) =>
      ctx.path === path ? route(ctx, () => answer(ctx)) : next();
  }

  it("limits a route mounted before the app's middleware by its own options instead", async () => {
    const limit = appLimit();
    const url = await start([at('/before', limit.route({ limit: 1 })), limit]);
    const own = await getMany(`${url}/before`, 2);
    expect(own.map((r) => r.status)).toEqual([200, 429]);
    expect(own[0]?.policy).toBe('"1-per-1m";q=1;w=60');
    // The app's budget is whole: the route was never counted against it.
    expect((await getMany(`${url}/`, 4)).map((r) => r.status)).toEqual([200, 200, 200, 429]);
  });

  it("counts a route mounted after the app's middleware against both", async () => {
    const limit = appLimit();
    const url = await start([limit, at('/after', limit.route({ group: 'after', limit: 5 }))]);
    const replies = await getMany(`${url}/after`, 4);
    expect(replies.map((r) => r.status)).toEqual([200, 200, 200, 429]);
    // The route sees its own decision, the last one made; the app's limit refuses the fourth.
    expect(replies.slice(0, 3).map((r) => r.remaining)).toEqual([4, 3, 2]);
    expect(replies[3]?.policy).toBe('"3-per-1m";q=3;w=60');
  });

  it("keeps the app's policies and budget for a route that changes only its cost", async () => {
    const limit = appLimit();
    const url = await start([at('/heavy', limit.route({ cost: 2 })), limit]);
    const [heavy] = await getMany(`${url}/heavy`, 1);
    expect(heavy).toEqual({ status: 200, policy: '"3-per-1m";q=3;w=60', remaining: 1 });
    // Same prefix and policies, no group: the route and the app draw from one budget.
    expect((await getMany(`${url}/`, 2)).map((r) => r.status)).toEqual([200, 429]);
  });

  it('answers with the route handler, or else with the handler of the app', async () => {
    const limit = appLimit({
      limit: 1,
      handler: (ctx) => {
        ctx.body = { from: 'app' };
      },
    });
    const own = limit.route({
      group: 'own',
      handler: (ctx) => {
        ctx.body = { from: 'route' };
      },
    });
    const url = await start([at('/inherits', limit.route({ group: 'inherits' })), at('/own', own)]);
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
