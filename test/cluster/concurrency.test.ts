// Concurrency on a 3+3 Redis Cluster: exactly `concurrency` slots per identity, on whichever
// master serves the identity's hash tag, given back by a release or with the response; and
// `shed`'s count of the whole fleet, whose key is on one master.
import { setTimeout as sleep } from 'node:timers/promises';
import { type Cluster, Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  createHttpLimiter,
  createLimiter,
  type Decision,
  type Limiter,
} from '../../packages/core/src/index.ts';
import type { RouteBody, RunningApp } from '../adapters/driver.ts';
import { driver } from '../adapters/express.ts';
import { CLIENTS, type ClientName, uniquePrefix } from '../harness/clients.ts';
import {
  clusterClient,
  keySlot,
  type RedisCluster,
  startCluster,
} from '../harness/redis-cluster.ts';
import type { RedisProcess } from '../harness/redis-server.ts';
import { waitFor } from '../harness/wait-for.ts';

const CONCURRENCY = 5;
const REQUESTS = 40;
const MASTERS = 3;

let cluster: RedisCluster;
const clients: Cluster[] = [];
const limiters: Limiter[] = [];
const apps: RunningApp[] = [];

beforeAll(async () => {
  cluster = await startCluster({ masters: MASTERS, replicas: 1 });
}, 60_000);

afterEach(async () => {
  await Promise.all([
    ...apps.splice(0).map((app) => app.close()),
    ...limiters.splice(0).map((limiter) => limiter.close()),
  ]);
});

afterAll(async () => {
  for (const client of clients) client.disconnect();
  await cluster?.stop();
});

/** A cluster client of the named library, with its default options. */
function connectCluster(name: ClientName): Cluster {
  const client = clusterClient(cluster, name);
  clients.push(client);
  return client;
}

/** `createLimiter({ redis: <cluster client>, concurrency: 5 })` under a prefix of its own. */
function limiterOn(redis: Cluster) {
  const prefix = uniquePrefix('cluster-concurrency');
  const limiter = createLimiter({ redis, prefix, concurrency: CONCURRENCY });
  limiters.push(limiter);
  return { limiter, prefix };
}

/**
 * Fresh identities, one served by each master: a limiter's keys are `<prefix>:{<identity>}…`,
 * so an identity's hash tag, and its slot, is the identity itself.
 */
async function identityPerMaster(): Promise<Array<{ identity: string; master: RedisProcess }>> {
  const label = uniquePrefix('tenant');
  const found = new Map<RedisProcess, string>();
  for (let i = 0; found.size < MASTERS; i++) {
    const identity = `${label}-${i}`;
    const { master } = await cluster.shardOf(keySlot(identity));
    if (!found.has(master)) found.set(master, identity);
  }
  return [...found].map(([master, identity]) => ({ identity, master }));
}

/** `count` consumes for `identity`, all at once. */
function consumeMany(limiter: Limiter, identity: string, count = REQUESTS): Promise<Decision[]> {
  return Promise.all(Array.from({ length: count }, () => limiter.consume(identity)));
}

/** The admitted decisions; every decision was Redis's, none a store-error mode's. */
function admittedOf(decisions: readonly Decision[]): Decision[] {
  expect(decisions.filter((d) => d.degraded !== undefined)).toEqual([]);
  return decisions.filter((d) => d.allowed);
}

/** Each key of `identity` under `prefix` on `node` alone, with the entries of its sorted set. */
async function slotEntriesOn(node: RedisProcess, prefix: string, identity: string) {
  const client = new Redis({ host: '127.0.0.1', port: node.port, lazyConnect: true });
  client.on('error', () => {});
  try {
    await client.connect();
    const [, keys] = await client.scan('0', 'MATCH', `${prefix}:{${identity}}*`, 'COUNT', 10_000);
    return Promise.all(keys.map(async (key) => ({ key, entries: await client.zcard(key) })));
  } finally {
    client.disconnect();
  }
}

describe.each(CLIENTS)(
  'a limiter with concurrency: 5 on the cluster through %s Cluster',
  (name) => {
    it('admits exactly 5 of 40 concurrent consumes for one identity, and 5 again once they are released', async () => {
      const { limiter } = limiterOn(connectCluster(name));
      const identity = uniquePrefix('tenant');

      const first = await consumeMany(limiter, identity);
      const held = admittedOf(first);
      expect(held).toHaveLength(CONCURRENCY);
      expect(
        first.filter((d) => !d.allowed && d.policy === `${CONCURRENCY}-in-flight`),
      ).toHaveLength(REQUESTS - CONCURRENCY);
      // Full: nothing more, however long the wait, until a slot is given back.
      expect((await limiter.consume(identity)).allowed).toBe(false);

      // A renewal keeps a slot; the release finds it where the renewal moved it.
      expect(await limiter.renew(held[0] as Decision)).toBe(true);
      expect(await Promise.all(held.map((d) => limiter.release(d)))).toEqual(
        Array(CONCURRENCY).fill(true),
      );
      // A second release frees nothing.
      expect(await limiter.release(held[0] as Decision)).toBe(false);
      expect((await limiter.peek(identity)).remaining).toBe(CONCURRENCY);

      const second = admittedOf(await consumeMany(limiter, identity));
      expect(second).toHaveLength(CONCURRENCY);
      expect(await Promise.all(second.map((d) => limiter.release(d)))).toEqual(
        Array(CONCURRENCY).fill(true),
      );
    });

    it('gives identities served by three different masters exactly 5 each, at the same time', async () => {
      const { limiter, prefix } = limiterOn(connectCluster(name));
      const identities = await identityPerMaster();
      expect(new Set(identities.map(({ master }) => master.port)).size).toBe(MASTERS);

      const decided = await Promise.all(
        identities.map(({ identity }) => consumeMany(limiter, identity)),
      );
      const held = decided.map(admittedOf);
      expect(held.map((admitted) => admitted.length)).toEqual(Array(MASTERS).fill(CONCURRENCY));
      // Each identity's slots are one sorted set of five entries, on the master serving it.
      for (const { identity, master } of identities) {
        expect((await slotEntriesOn(master, prefix, identity)).map((key) => key.entries)).toEqual([
          CONCURRENCY,
        ]);
      }

      // Releasing one identity's slots frees that identity alone.
      const [freed, ...others] = identities;
      const [freedHeld] = held;
      expect(await Promise.all((freedHeld ?? []).map((d) => limiter.release(d)))).toEqual(
        Array(CONCURRENCY).fill(true),
      );
      expect((await limiter.peek(freed?.identity as string)).remaining).toBe(CONCURRENCY);
      for (const { identity } of others) expect((await limiter.peek(identity)).remaining).toBe(0);
      for (const admitted of held.slice(1))
        await Promise.all(admitted.map((d) => limiter.release(d)));
      for (const { identity } of identities) {
        expect((await limiter.peek(identity)).remaining).toBe(CONCURRENCY);
      }
    });
  },
);

it('lets 5 of 40 concurrent requests through an Express app on the cluster run at once, and gives their slots back with the responses', async ({
  annotate,
}) => {
  let running = 0;
  let most = 0;
  const redis = connectCluster('ioredis 6');
  const prefix = uniquePrefix('cluster-concurrency-app');
  const app = await driver.start({
    options: { redis, prefix, concurrency: CONCURRENCY },
    routes: [
      {
        path: '/slow',
        async work() {
          most = Math.max(most, ++running);
          await sleep(300);
          running--;
        },
      },
    ],
  });
  apps.push(app);
  const started = performance.now();
  const replies = await Promise.all(
    Array.from({ length: REQUESTS }, async () => {
      const response = await fetch(`${app.url}/slow`);
      return { status: response.status, body: (await response.json()) as Partial<RouteBody> };
    }),
  );
  const ms = Math.round(performance.now() - started);
  const admitted = replies.filter((r) => r.status === 200);
  expect(admitted.filter((r) => r.body.rateLimit?.degraded !== undefined)).toEqual([]);
  expect(admitted).toHaveLength(CONCURRENCY);
  expect(replies.filter((r) => r.status === 429)).toHaveLength(REQUESTS - CONCURRENCY);
  expect(most).toBe(CONCURRENCY);
  // Every slot came back with its response (each is released once its response closed)...
  const reader = createLimiter({ redis, prefix, concurrency: CONCURRENCY });
  limiters.push(reader);
  await waitFor(
    async () => (await reader.peek('ip:127.0.0.1')).remaining === CONCURRENCY,
    10_000,
    'every slot to come back',
  );
  // ...and one request after another, each is admitted.
  for (let i = 0; i < 10; i++) expect((await fetch(app.url)).status).toBe(200);
  await annotate(`40 concurrent requests answered in ${ms} ms`);
});

it("sheds past the fleet's normal share on the cluster, where the fleet's slot is taken in a call of its own", async () => {
  const redis = connectCluster('ioredis 6');
  const errors: Error[] = [];
  const http = createHttpLimiter({
    redis,
    prefix: uniquePrefix('cluster-shed'),
    limit: 100,
    window: '1m',
    shed: { concurrency: 10, reserve: 0.2, critical: (req) => req.headers['x-critical'] === 'yes' },
    onError: (error) => errors.push(error),
  });
  // Thirty clients, whose identities are on every master, and the fleet's key on one of them.
  const request = (i: number, critical = false) => ({
    headers: critical ? { 'x-critical': 'yes' } : {},
    ip: `198.51.100.${i}`,
  });
  const verdicts = await Promise.all(Array.from({ length: 30 }, (_, i) => http.check(request(i))));
  const passed = verdicts.filter((v) => v.action === 'next');
  expect(passed).toHaveLength(8);
  expect(passed.every((v) => v.action === 'next' && v.fleet?.lease !== undefined)).toBe(true);
  const refused = verdicts.filter((v) => v.action === 'respond');
  expect(refused.map((v) => v.action === 'respond' && v.status)).toEqual(Array(22).fill(503));
  // Critical requests get the last 2 slots, and no more.
  const reserve = await Promise.all([0, 1, 2].map((i) => http.check(request(100 + i, true))));
  expect(reserve.map((v) => (v.action === 'respond' ? v.status : 200)).sort()).toEqual([
    200, 200, 503,
  ]);
  // The identities paid only for the requests let in, and nothing failed over to a degraded mode.
  expect((await http.limiter.peek('ip:198.51.100.0')).remaining).toBeGreaterThanOrEqual(99);
  expect(errors).toEqual([]);
  await http.close();
});
