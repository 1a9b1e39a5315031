// The Hono version of the example API, built by a function so that each test can give it a store
// of its own, or Redis, and the client address that app.request() has no connection to give.
import {
  byApiKey,
  byIp,
  chain,
  type RateLimitMiddleware,
  type RateLimitOptions,
  type RateLimitVariables,
  rateLimit,
} from '@sentinel/hono';
import { Hono } from 'hono';
import { EXPORTS, findApiKey, LOGIN, TIERS } from './policies.ts';

export interface AppOptions
  extends Pick<
    RateLimitOptions,
    'store' | 'redis' | 'redisUrl' | 'prefix' | 'getConnInfo' | 'onError'
  > {
  /** What the export route answers with, once its work is done. */
  exportRows?: () => Promise<unknown[]>;
}

export function createApp({ exportRows = async () => [], ...stored }: AppOptions = {}): {
  app: Hono<{ Variables: RateLimitVariables }>;
  limit: RateLimitMiddleware;
} {
  const limit = rateLimit({
    ...stored,
    tiers: TIERS,
    // A key its tenant was issued gets that tenant's tier; a key nobody issued gets a 401.
    identify: chain(byApiKey({ lookup: findApiKey, unknownKey: 'reject' }), byIp()),
  });
  const app = new Hono<{ Variables: RateLimitVariables }>();
  // Routes with limits of their own come before the app-wide middleware.
  app.post('/login', limit.route({ group: 'login', policies: LOGIN }), (c) =>
    c.json({ error: 'wrong password' }, 401),
  );
  app.get('/export', limit.route({ group: 'export', policies: EXPORTS }), async (c) =>
    c.json({ rows: await exportRows() }),
  );
  app.use(limit);
  app.get('/hello', (c) => {
    const decision = c.get('rateLimit');
    return c.json({ tier: decision?.tier, remaining: decision?.remaining });
  });
  return { app, limit };
}
