// A Hono API limited per tenant: FREE 10/min, PRO 100/min with a 20/s burst, ENTERPRISE 1000/min.
// Runs on Node (`tsx index.ts`), Bun (`bun index.ts`) and Deno (`deno run -A index.ts`).
import { byApiKey, byIp, chain, type RateLimitVariables, rateLimit } from '@sentinel/hono';
import { Hono } from 'hono';
import { serve } from './serve.ts';

// Stands in for your database of issued API keys; Sentinel caches the answers.
const API_KEYS: Record<string, { tenant: string; tier: string }> = {
  'free-key': { tenant: 'acme', tier: 'FREE' },
  'pro-key': { tenant: 'globex', tier: 'PRO' },
  'enterprise-key': { tenant: 'initech', tier: 'ENTERPRISE' },
};

// With REDIS_URL the limits hold across every instance, whatever runtime each runs on; without
// it each process counts alone.
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
  // Known keys get their tenant's tier; no key or an unknown one counts by IP in FREE. The IP is
  // the connection's, read from the runtime; behind a proxy you run, set `trustProxy: 1`.
  identify: chain(byApiKey({ lookup: (key) => API_KEYS[key] ?? null }), byIp()),
  trustProxy: process.env.TRUST_PROXY === '1' ? 1 : false,
});

const app = new Hono<{ Variables: RateLimitVariables }>();
app.use(limiter);
app.get('/', (c) => {
  const decision = c.get('rateLimit');
  return c.json({ hello: 'world', tier: decision?.tier ?? null, remaining: decision?.remaining });
});

const { runtime, port } = await serve(app.fetch, Number(process.env.PORT ?? 3000));
console.log(
  `Hono on ${runtime} at http://localhost:${port}, counting ${redisUrl ? 'in Redis' : 'in memory'}`,
);
console.log(`Try: curl -i -H 'x-api-key: pro-key' http://localhost:${port}/`);
