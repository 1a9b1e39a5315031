// The Koa version of the example API, built by a function so that each test can give it a store
// of its own, or Redis.
import {
  byApiKey,
  byIp,
  chain,
  type RateLimitMiddleware,
  type RateLimitOptions,
  rateLimit,
} from '@sentinel/koa';
import Koa from 'koa';
import { EXPORTS, findApiKey, LOGIN, TIERS } from './policies.ts';

export interface AppOptions extends Pick<RateLimitOptions, 'store' | 'redisUrl' | 'prefix'> {
  /** What the export route answers with, once its work is done. */
  exportRows?: () => Promise<unknown[]>;
}

export function createApp({ exportRows = async () => [], ...stored }: AppOptions = {}): {
  app: Koa;
  limit: RateLimitMiddleware;
} {
  const limit = rateLimit({
    ...stored,
    tiers: TIERS,
    // A key its tenant was issued gets that tenant's tier; a key nobody issued gets a 401.
    identify: chain(byApiKey({ lookup: findApiKey, unknownKey: 'reject' }), byIp()),
  });
  const login = limit.route({ group: 'login', policies: LOGIN });
  const exporting = limit.route({ group: 'export', policies: EXPORTS });
  const app = new Koa();
  // A router would mount these; routes with limits of their own skip the app-wide one.
  app.use(async function routes(ctx, next) {
    if (ctx.method === 'POST' && ctx.path === '/login') {
      return login(ctx, async () => {
        ctx.status = 401;
        ctx.body = { error: 'wrong password' };
      });
    }
    if (ctx.method === 'GET' && ctx.path === '/export') {
      return exporting(ctx, async () => {
        ctx.body = { rows: await exportRows() };
      });
    }
    return limit(ctx, next);
  });
  app.use(async (ctx) => {
    if (ctx.path !== '/hello') return;
    ctx.body = { tier: ctx.state.rateLimit?.tier, remaining: ctx.state.rateLimit?.remaining };
  });
  return { app, limit };
}
