// A Koa API limited per tenant: FREE 10/min, PRO 100/min with a 20/s burst, ENTERPRISE 1000/min.
import { byApiKey, byIp, chain, rateLimit } from '@sentinel/koa';
import Koa from 'koa';

// Stands in for your database of issued API keys; Sentinel caches the answers.
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
  // Known keys get their tenant's tier; no key or an unknown one counts by IP in FREE.
  identify: chain(byApiKey({ lookup: (key) => API_KEYS[key] ?? null }), byIp()),
});

const app = new Koa();
// Trust X-Forwarded-For only behind a proxy you run: clients could forge it otherwise.
app.proxy = process.env.TRUST_PROXY === '1';
app.use(limiter);
app.use((ctx) => {
  const decision = ctx.state.rateLimit;
  ctx.body = { hello: 'world', tier: decision?.tier ?? null, remaining: decision?.remaining };
});

const port = Number(process.env.PORT ?? 3000);
const server = app.listen(port, () => {
  console.log(`Koa on http://localhost:${port}, counting ${redisUrl ? 'in Redis' : 'in memory'}`);
  console.log(`Try: curl -i -H 'x-api-key: pro-key' http://localhost:${port}/`);
});

process.once('SIGINT', () => {
  server.close();
  void limiter.close();
});
