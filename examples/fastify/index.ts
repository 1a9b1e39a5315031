// A Fastify API behind Sentinel: three tiers, API keys mapped to tenants, Redis if REDIS_URL is set.
import { byApiKey, byIp, chain, sentinel } from '@sentinel/fastify';
import Fastify from 'fastify';

// Stands in for your database of issued keys; only its answers are cached, never the raw keys.
const API_KEYS: Record<string, { tenant: string; tier: string }> = {
  'free-key': { tenant: 'acme', tier: 'FREE' },
  'pro-key': { tenant: 'globex', tier: 'PRO' },
  'enterprise-key': { tenant: 'initech', tier: 'ENTERPRISE' },
};

// With REDIS_URL the limits hold across every instance, over a client with the settings a limiter
// wants (built, listened to and closed by Sentinel); without it each process counts alone.
const redisUrl = process.env.REDIS_URL;

const app = Fastify({ trustProxy: 'loopback' });
await app.register(sentinel, {
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

app.get('/', async (request) => ({
  tier: request.rateLimit?.tier,
  remaining: request.rateLimit?.remaining,
}));
// Searching costs 5 of the tier's budget; the health check is never limited.
app.get('/search', { config: { rateLimit: { cost: 5 } } }, async () => ({ results: [] }));
app.get('/health', { config: { rateLimit: false } }, async () => ({ ok: true }));

const port = Number(process.env.PORT ?? 3000);
await app.listen({ port });
console.log(`Listening on http://localhost:${port} (${redisUrl ? 'Redis' : 'memory'} store). Try:`);
console.log(`  curl -i localhost:${port}/ -H 'x-api-key: pro-key'`);
process.once('SIGINT', () => void app.close());
