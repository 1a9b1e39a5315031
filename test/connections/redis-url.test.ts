// redisUrl and createRedisClient: the client Sentinel builds, its settings, and who closes which client.
import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLimiter, createRedisClient } from '../../packages/core/src/index.ts';
import { connect, uniquePrefix } from '../harness/clients.ts';
import { admittedOf, STEADY } from '../harness/connection-checks.ts';
import { type RedisCluster, startCluster } from '../harness/redis-cluster.ts';
import { type RedisProcess, startRedis } from '../harness/redis-server.ts';
import { waitFor } from '../harness/wait-for.ts';

let server: RedisProcess;
let cluster: RedisCluster;
let admin: Redis;
/** One plain connection per cluster node, to count its clients. */
let nodeAdmins: Redis[];
const built: Array<{ disconnect(): void }> = [];

beforeAll(async () => {
  // One after the other: a server already started is then known to afterAll if the next fails.
  server = await startRedis();
  cluster = await startCluster({ masters: 3, replicas: 0 });
  admin = connect('ioredis 6', server.url);
  nodeAdmins = cluster.nodes.map((node) => connect('ioredis 6', node.url));
}, 60_000);
afterAll(async () => {
  for (const client of built) client.disconnect();
  await Promise.all([server?.stop(), cluster?.stop()]);
});

/** Connections the server holds (CLIENT LIST), summed over `admins`, each counting itself. */
async function connections(admins: readonly Redis[]): Promise<number> {
  const lists = await Promise.all(admins.map((a) => a.client('LIST') as Promise<string>));
  return lists.reduce((sum, list) => sum + list.trim().split('\n').length, 0);
}

/** The id of the connection named `name` (CLIENT LIST), if it is open. */
async function connectionId(admin: Redis, name: string): Promise<string | undefined> {
  const list = (await admin.client('LIST')) as string;
  const line = list.split('\n').find((entry) => entry.includes(` name=${name} `));
  return line ? /\bid=(\d+)/.exec(line)?.[1] : undefined;
}

const urls = () => cluster.nodes.map((node) => node.url);

describe('a limiter given redisUrl', () => {
  it('limits through one server named by a URL', async () => {
    const prefix = uniquePrefix('url');
    const limiter = createLimiter({
      ...STEADY,
      redisUrl: server.url,
      prefix,
      limit: 3,
      window: '1d',
    });
    expect(await admittedOf(() => limiter.consume('tenant'), 4)).toEqual([true, true, true, false]);
    expect(await admin.exists(`${prefix}:{tenant}:3-per-1d:token-bucket`)).toBe(1);
    await limiter.close();
  });

  it.each([
    ['a list of URLs', () => urls()],
    ['one comma-separated string of URLs', () => urls().join(', ')],
  ])(
    'builds a Cluster client from %s and limits every tenant on its own master',
    async (_, redisUrl) => {
      const limiter = createLimiter({
        ...STEADY,
        redisUrl: redisUrl(),
        prefix: uniquePrefix('url-cluster'),
        limit: 1,
        window: '1d',
      });
      // 60 tenants hash to slots on all three masters; a client that was not a Cluster client
      // would meet MOVED replies, which STEADY turns into failures.
      const tenants = Array.from({ length: 60 }, (_, i) => `tenant-${i}`);
      const first = await Promise.all(tenants.map((tenant) => limiter.consume(tenant)));
      const second = await Promise.all(tenants.map((tenant) => limiter.consume(tenant)));
      expect(first.filter((d) => d.allowed)).toHaveLength(60);
      expect(second.filter((d) => d.allowed)).toHaveLength(0);
      const keysPerNode = await Promise.all(nodeAdmins.map((node) => node.dbsize()));
      for (const keys of keysPerNode) expect(keys).toBeGreaterThan(0);
      await limiter.close();
    },
  );

  it('quits the client it built on close(), and the server sees the connection go', async () => {
    const before = await connections([admin]);
    const limiter = createLimiter({ ...STEADY, redisUrl: server.url, limit: 3, window: '1d' });
    await limiter.consume('tenant');
    expect(await connections([admin])).toBe(before + 1);
    await limiter.close();
    await waitFor(
      async () => (await connections([admin])) === before,
      5_000,
      'the connection closing',
    );
    // And it stays gone: a quit client does not reconnect.
    await sleep(700);
    expect(await connections([admin])).toBe(before);
    // The positive control: a client of the same settings whose connection the server drops is
    // back within the same 700 ms.
    const control = createRedisClient(server.url, { connectionName: 'control' });
    built.push(control);
    await waitFor(async () => (await connectionId(admin, 'control')) !== undefined);
    const dropped = await connectionId(admin, 'control');
    await admin.client('KILL', 'ID', String(dropped));
    await sleep(700);
    const again = await connectionId(admin, 'control');
    expect(again).toBeDefined();
    expect(again).not.toBe(dropped);
  });

  it('quits every node connection of the Cluster client it built on close()', async () => {
    const before = await connections(nodeAdmins);
    const limiter = createLimiter({ ...STEADY, redisUrl: urls(), limit: 3, window: '1d' });
    await Promise.all(Array.from({ length: 30 }, (_, i) => limiter.consume(`tenant-${i}`)));
    expect(await connections(nodeAdmins)).toBeGreaterThanOrEqual(before + 3);
    await limiter.close();
    await waitFor(
      async () => (await connections(nodeAdmins)) === before,
      5_000,
      'the connections closing',
    );
  });

  it('leaves a client passed as redis open after close()', async () => {
    const client = connect('ioredis 6', server.url);
    const limiter = createLimiter({ ...STEADY, redis: client, limit: 3, window: '1d' });
    await limiter.consume('tenant');
    const before = await connections([admin]);
    await limiter.close();
    await sleep(200);
    expect(client.status).toBe('ready');
    expect(await client.ping()).toBe('PONG');
    expect(await connections([admin])).toBe(before);
    // The positive control: a connection that does close is gone within the same 200 ms.
    await client.quit();
    await sleep(200);
    expect(await connections([admin])).toBe(before - 1);
  });

  it('rejects URLs that are not redis:// or rediss://, and redisUrl beside redis', () => {
    const options = { limit: 1, window: '1s' } as const;
    expect(() => createLimiter({ ...options, redisUrl: 'http://127.0.0.1:6379' })).toThrow(
      /`redisUrl` must be redis:\/\/ or rediss:\/\/ URLs/,
    );
    expect(() => createLimiter({ ...options, redisUrl: [] })).toThrow(TypeError);
    const client = connect('ioredis 6', server.url);
    expect(() => createLimiter({ ...options, redis: client, redisUrl: server.url })).toThrow(
      /`redisUrl` cannot be combined with `redis`/,
    );
  });
});

/** A reconnect delay every attempt keeps: positive (never gives up) and at most `cap` ms. */
function expectBoundedRetries(strategy: unknown, cap: number): void {
  expect(typeof strategy).toBe('function');
  const delays = [1, 2, 3, 5, 10, 100, 10_000].map((attempt) =>
    (strategy as (attempt: number) => unknown)(attempt),
  );
  for (const delay of delays) {
    expect(typeof delay).toBe('number');
    expect(delay).toBeGreaterThan(0);
    expect(delay).toBeLessThanOrEqual(cap);
  }
}

describe('createRedisClient', () => {
  it('builds an ioredis Redis that queues nothing offline, re-sends nothing and keeps alive', () => {
    const client = createRedisClient(server.url) as unknown as Redis;
    built.push(client);
    expect(client).toBeInstanceOf(Redis);
    expect(client.options).toMatchObject({
      port: server.port,
      enableOfflineQueue: false,
      autoResendUnfulfilledCommands: false,
      maxRetriesPerRequest: 1,
    });
    expect(client.options.keepAlive).toBeGreaterThan(0);
    expectBoundedRetries(client.options.retryStrategy, 2_000);
  });

  it('builds an ioredis Cluster with the same node settings from several URLs, keeping its queue', () => {
    const client = createRedisClient(urls()) as unknown as Cluster;
    built.push(client);
    expect(client).toBeInstanceOf(Cluster);
    // Its masters are connected at their first command, which waits in the queue meanwhile.
    expect(client.options.enableOfflineQueue).toBe(true);
    expectBoundedRetries(client.options.clusterRetryStrategy, 2_000);
    expect(client.options.redisOptions).toMatchObject({
      autoResendUnfulfilledCommands: false,
      maxRetriesPerRequest: 1,
    });
    expect(client.options.redisOptions?.keepAlive).toBeGreaterThan(0);
  });

  it('layers the options it is given over its own', () => {
    const client = createRedisClient(server.url, { keepAlive: 1_234 }) as unknown as Redis;
    built.push(client);
    expect(client.options).toMatchObject({ keepAlive: 1_234, enableOfflineQueue: false });
  });
});
