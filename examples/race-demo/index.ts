// `pnpm demo:race`: 4 gateway processes on one Redis race 2000 requests for one tenant, naive limiter vs Sentinel.
import { ALGORITHMS } from '@sentinel/core';
import { Redis } from 'ioredis';
import { ADAPTERS, awayFromWindowEdge, freshTenant, race, startGateways } from './fleet.ts';
import { startThrowawayRedis, type ThrowawayRedis } from './throwaway-redis.ts';

const GATEWAYS = 4;
const REQUESTS = 2000;
const LIMIT = 100;
const HOUR_MS = 3_600_000;

// Ctrl-C still runs the exit handlers that stop the gateways and a throw-away Redis.
process.once('SIGINT', () => process.exit(130));

async function connect(url: string): Promise<Redis | undefined> {
  const client = new Redis(url, { lazyConnect: true, retryStrategy: () => null });
  client.on('error', () => {});
  try {
    await client.connect();
    return client;
  } catch {
    client.disconnect();
    return undefined;
  }
}

const wanted = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
let server: ThrowawayRedis | undefined;
let redis = await connect(wanted);
if (!redis) {
  try {
    server = await startThrowawayRedis();
  } catch (error) {
    console.error(
      (error as NodeJS.ErrnoException).code === 'ENOENT'
        ? `Redis is not reachable at ${wanted}, and there is no redis-server binary to start one.\n` +
            'Start Redis (Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis) ' +
            'or set REDIS_URL, then run `pnpm demo:race` again.'
        : `Redis is not reachable at ${wanted}, and a throw-away redis-server failed: ${String(error)}`,
    );
    process.exit(1);
  }
  redis = (await connect(server.url)) as Redis;
  console.log(`No Redis at ${wanted}: using a throw-away redis-server at ${server.url}.`);
}
const redisUrl = server?.url ?? wanted;

// A prefix of its own, removed at the end, so the demo leaves the user's Redis as it found it.
const prefix = `sentinel-race-demo-${process.pid}-${Date.now().toString(36)}`;
const adapters = Array.from({ length: GATEWAYS }, (_, i) => ADAPTERS[i % ADAPTERS.length]);
console.log(`Starting ${GATEWAYS} gateway processes (${adapters.join(', ')}) on ${redisUrl} ...`);
const fleet = await startGateways(
  adapters.map((adapter) => ({ adapter: adapter ?? 'express', redisUrl, prefix })),
);

const rows: string[][] = [];
let exitCode = 0;
/** Sentinel's admissions that `onStoreError` made because Redis missed the deadline. */
let degradedTotal = 0;
try {
  console.log(
    `Each row: ${REQUESTS} concurrent requests for one tenant, round-robin over the gateways, at a limit of ${LIMIT} per hour.\n`,
  );
  const limiters = [
    { name: 'naive read-decide-write', path: '/naive' },
    ...ALGORITHMS.map((algorithm) => ({ name: `Sentinel ${algorithm}`, path: `/${algorithm}` })),
  ];
  for (const { name, path } of limiters) {
    // An hourly fixed window that rolled over mid-race would rightly admit a second 100.
    if (path === '/fixed-window') await awayFromWindowEdge(redis, HOUR_MS);
    const { admitted, degraded } = await race(fleet.gateways, path, freshTenant('demo'), REQUESTS);
    const overshoot = Math.max(0, admitted - LIMIT);
    if (path !== '/naive' && overshoot > 0) exitCode = 1;
    degradedTotal += degraded;
    rows.push([name, GATEWAYS, REQUESTS, LIMIT, admitted, overshoot].map(String));
  }
} finally {
  await fleet.stop();
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    if (keys.length > 0) await redis.unlink(...keys);
    cursor = next;
  } while (cursor !== '0');
  redis.disconnect();
  await server?.stop();
}

const header = ['limiter', 'gateways', 'requests', 'limit', 'admitted', 'overshoot'];
const widths = header.map((title, i) =>
  Math.max(title.length, ...rows.map((row) => row[i]?.length ?? 0)),
);
const line = (cells: string[]) =>
  cells
    .map((cell, i) => (i === 0 ? cell.padEnd(widths[i] ?? 0) : cell.padStart(widths[i] ?? 0)))
    .join('  ');
console.log(line(header));
console.log(line(widths.map((width) => '-'.repeat(width))));
for (const row of rows) console.log(line(row));

const naive = Number(rows[0]?.[4]);
if (degradedTotal > 0) {
  console.log(
    `\n${degradedTotal} of Sentinel's admissions were degraded: Redis did not answer within the limiter's\n` +
      "deadline, so `onStoreError` decided without it. Those rows measure the fallback, not Redis's atomic\n" +
      'scripts; run the demo again on a less busy machine.',
  );
} else {
  console.log(
    exitCode === 0
      ? `\nThe naive limiter admitted ${naive}, ${naive - LIMIT} over the limit: requests read the count while others\n` +
          'were still writing theirs back, so their updates overwrote each other.\n' +
          `Sentinel admitted exactly ${LIMIT} with every algorithm: each decision is one Lua script that Redis runs atomically.`
      : '\nSentinel overshot the limit: this is a bug, please report it.',
  );
}
process.exitCode = exitCode;
