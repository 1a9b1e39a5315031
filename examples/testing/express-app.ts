// The Express version of the example API, built by a function so that each test can give it a
// store of its own, or Redis.
import {
  byApiKey,
  byIp,
  chain,
  type RateLimitMiddleware,
  type RateLimitOptions,
  rateLimit,
} from '@sentinel/express';
import express, { type Express } from 'express';
import { EXPORTS, findApiKey, LOGIN, TIERS } from './policies.ts';

export interface AppOptions extends Pick<RateLimitOptions, 'store' | 'redisUrl' | 'prefix'> {
  /** What the export route answers with, once its work is done. */
  exportRows?: () => Promise<unknown[]>;
}

export function createApp({ exportRows = async () => [], ...stored }: AppOptions = {}): {
  app: Express;
  limit: RateLimitMiddleware;
} {
  const limit = rateLimit({
    ...stored,
    tiers: TIERS,
    // A key its tenant was issued gets that tenant's tier; a key nobody issued gets a 401.
    identify: chain(byApiKey({ lookup: findApiKey, unknownKey: 'reject' }), byIp()),
  });
  const app = express();
  // Routes with limits of their own come before the app-wide middleware.
  app.post('/login', limit.route({ group: 'login', policies: LOGIN }), (_req, res) => {
    res.status(401).json({ error: 'wrong password' });
  });
  app.get('/export', limit.route({ group: 'export', policies: EXPORTS }), async (_req, res) => {
    res.json({ rows: await exportRows() });
  });
  app.use(limit);
  app.get('/hello', (req, res) => {
    res.json({ tier: req.rateLimit?.tier, remaining: req.rateLimit?.remaining });
  });
  return { app, limit };
}
