// An Express API behind Sentinel: three tiers, API keys mapped to tenants, Redis if REDIS_URL is set.
import { byApiKey, byIp, chain, rateLimit } from '@sentinel/express';
import express from 'express';

// Stands in for your database of issued keys; only its answers are cached, never the raw keys.
const API_KEYS: Record<string, { tenant: string; tier: string }> = {
  'free-key': { tenant: 'acme', tier: 'FREE' },
  'pro-key': { tenant: 'globex', tier: 'PRO' },
  'enterprise-key': { tenant: 'initech', tier: 'ENTERPRISE' },
};

// With REDIS_URL the limits hold across every instance, over a client with the settings a limiter
// wants (built, listened to and closed by Sentinel); without it each process counts alone.
const redisUrl = process.env.REDIS_URL;

const limiter = rateLimit({
  redisUrl,
  tiers: {
    FREE: { name: 'free-minute', limit: 10, window: '1m' },
    PRO: [
      { name: 'pro-minute', limit: 100, window: '1m' },
      { name: 'pro-burst', limit: 20, window: '1s', algorithm: 'gcra' },
    ],
    ENTERPRISE: { name: 'enterprise-minute', limit: 1000, window: '1m' },
  },
  // A known key selects its tenant's tier; no key means FREE by client IP; a bad key gets a 401.
  identify: chain(
    byApiKey({ lookup: async (key) => API_KEYS[key] ?? null, unknownKey: 'reject' }),
    byIp(),
  ),
});

const app = express();
app.set('trust proxy', 'loopback');
// Routes added before the app-wide limiter answer without it: /search is limited by its own
// middleware alone, layered over the app's options, and /health by none.
app.get('/search', limiter.route({ cost: 5 }), (_req, res) => {
  res.json({ results: [] });
});
app.get('/health', (_req, res) => {
  res.json({ ok: true });
});
app.use(limiter);
app.get('/', (req, res) => {
  res.json({ tier: req.rateLimit?.tier, remaining: req.rateLimit?.remaining });
});

const port = Number(process.env.PORT ?? 3000);
const server = app.listen(port, () => {
  console.log(
    `Listening on http://localhost:${port} (${redisUrl ? 'Redis' : 'memory'} store). Try:`,
  );
  console.log(`  curl -i localhost:${port}/ -H 'x-api-key: pro-key'`);
});

process.once('SIGINT', () => {
  server.close();
  void limiter.close();
});
