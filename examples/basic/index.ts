// Prints decisions for a FREE and a PRO tenant, from the memory store and, if reachable, Redis.
import { createLimiter, LIMITER_CLIENT_OPTIONS, type Limiter } from '@sentinel/core';
import { Redis } from 'ioredis';

const tiers = {
  FREE: { name: 'free-minute', limit: 10, window: '1m' },
  PRO: [
    { name: 'pro-minute', limit: 100, window: '1m' },
    { name: 'pro-burst', limit: 20, window: '1s', algorithm: 'gcra' },
  ],
} as const;

async function show(title: string, limiter: Limiter): Promise<void> {
  console.log(`\n${title}`);
  const tenant = `demo-${Date.now()}`;
  for (let i = 1; i <= 12; i++) {
    const d = await limiter.consume(`${tenant}-free`);
    const wait = d.allowed ? '' : `  retry in ${Math.ceil(d.retryAfterMs / 1000)} s`;
    console.log(
      `  FREE request ${String(i).padStart(2)}: ${d.allowed ? 'allowed' : 'limited'}  remaining ${d.remaining}${wait}`,
    );
  }
  const burst = await Promise.all(
    Array.from({ length: 25 }, () => limiter.consume(`${tenant}-pro`, { tier: 'PRO' })),
  );
  const last = burst[burst.length - 1];
  console.log(
    `  PRO burst of 25 at once: ${burst.filter((d) => d.allowed).length} allowed, limited by ${last?.policy}`,
  );
  const heavy = await limiter.consume(`${tenant}-pro`, { tier: 'PRO', cost: 5 });
  console.log(
    `  PRO request costing 5 right after: ${heavy.allowed ? 'allowed' : `limited, retry in ${heavy.retryAfterMs} ms`}`,
  );
}

const memory = createLimiter({ tiers });
await show('Memory store (the default):', memory);
await memory.close();

const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
// The settings a limiter wants (see "ioredis settings" in the README), connecting only once here:
// the example checks whether Redis answers rather than waiting for it.
const redis = new Redis(url, {
  ...LIMITER_CLIENT_OPTIONS,
  lazyConnect: true,
  retryStrategy: () => null,
});
// Without a listener, ioredis reports every failed connection as an unhandled error event.
redis.on('error', () => {});
try {
  await redis.connect();
} catch {
  console.log(
    `\nRedis is not reachable at ${url}; start redis-server or set REDIS_URL to see the Redis store.`,
  );
}
if (redis.status === 'ready') {
  const shared = createLimiter({ tiers, redis });
  await show(`Redis store at ${url} (atomic across every gateway that shares it):`, shared);
  await shared.close();
  await redis.quit();
}
