// Redis Cluster of 3 masters and 3 replicas, default options: no CROSSSLOT, keys placed by slot, exact races.

import { type Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { naiveTokenBucket } from '../../../../examples/race-demo/naive-limiter.ts';
import { CLIENTS, type ClientName, uniquePrefix } from '../../../../test/harness/clients.ts';
import { besideCpuHog } from '../../../../test/harness/cpu-hog.ts';
import {
  clusterClient,
  keySlot,
  type RedisCluster,
  startCluster,
} from '../../../../test/harness/redis-cluster.ts';
import { failOnError } from '../../../../test/harness/store-errors.ts';
import {
  ALGORITHMS,
  type Algorithm,
  createLimiter,
  type Decision,
  type LimiterOptions,
  type PolicyOptions,
} from '../../src/index.ts';
import { onRedis } from '../stores.ts';

let cluster: RedisCluster;
const clients: Cluster[] = [];

function connectCluster(name: ClientName = 'ioredis 6'): Cluster {
  const client = clusterClient(cluster, name);
  clients.push(client);
  return client;
}

/**
 * The options a user gets by default, 50 ms deadline included: a burst on the cluster must be
 * counted, not waved through. Any store error fails the test instead of degrading quietly.
 */
const STRICT = { onError: failOnError };

/** Two policies at once: the burst one binds first, and the hourly one is charged no further. */
const TWO_POLICIES: PolicyOptions[] = [
  { name: 'hourly', limit: 100, window: '1h', algorithm: 'sliding-window-log' },
  { name: 'burst', limit: 60, window: '1h', algorithm: 'gcra' },
];

/** Every key of the cluster's masters under `prefix`, by master port. */
async function keysByMaster(client: Cluster, prefix: string): Promise<Map<number, string[]>> {
  const masters = client.nodes('master');
  const keys = await Promise.all(masters.map((node) => node.keys(`${prefix}:*`)));
  return new Map(masters.map((node, i) => [node.options.port as number, keys[i] as string[]]));
}

/** Runs `command` on a connection of its own to each master the cluster's topology names. */
async function onEveryMaster<T>(command: (master: Redis) => Promise<T>): Promise<T[]> {
  const masters = (await cluster.topology()).filter((node) => node.role === 'master');
  return Promise.all(
    masters.map(async ({ port }) => {
      const master = new Redis({ port, host: '127.0.0.1', lazyConnect: true });
      try {
        return await command(master);
      } finally {
        master.disconnect();
      }
    }),
  );
}

const LOADS = {
  'on an idle machine': <T>(test: () => Promise<T>) => test(),
  'beside a CPU hog': besideCpuHog,
};

function tally(decisions: readonly Decision[]) {
  return {
    admitted: decisions.filter((d) => d.allowed).length,
    degraded: decisions.filter((d) => d.degraded !== undefined).length,
  };
}

/** The master port serving each slot, from the cluster's own view. */
async function masterPortOf(slots: readonly number[]): Promise<number[]> {
  const masters = (await cluster.topology()).filter((node) => node.role === 'master');
  return slots.map((slot) => {
    const owner = masters.find((node) =>
      node.slots.some(([start, end]) => start <= slot && slot <= end),
    );
    if (!owner) throw new Error(`no master serves slot ${slot}`);
    return owner.port;
  });
}

beforeAll(async () => {
  cluster = await startCluster({ masters: 3, replicas: 1 });
}, 60_000);

afterAll(async () => {
  await Promise.all(clients.map((client) => client.quit().catch(() => client.disconnect())));
  await cluster?.stop();
});

describe('on a Redis Cluster of three masters with a replica each', () => {
  it('has three masters serving every slot, each with one replica', async () => {
    const nodes = await cluster.topology();
    const masters = nodes.filter((node) => node.role === 'master');
    expect(masters).toHaveLength(3);
    expect(masters.flatMap((m) => m.slots).reduce((sum, [a, b]) => sum + b - a + 1, 0)).toBe(16384);
    for (const master of masters) {
      expect(nodes.filter((node) => node.masterId === master.id)).toHaveLength(1);
    }
  });

  it.each(CLIENTS)(
    'runs every algorithm and a mixed tier through %s without CROSSSLOT',
    async (name) => {
      const policies: PolicyOptions[] = ALGORITHMS.map((algorithm) => ({
        name: algorithm,
        limit: 3,
        window: '1h',
        algorithm,
      }));
      const limiter = createLimiter({
        ...STRICT,
        redis: connectCluster(name),
        prefix: uniquePrefix('cluster'),
        tiers: { FREE: { limit: 2, window: '1h' }, MIXED: policies },
      });
      for (const algorithm of ALGORITHMS) {
        const single = createLimiter({
          ...STRICT,
          redis: connectCluster(name),
          prefix: uniquePrefix('cluster'),
          limit: 2,
          window: '1h',
          algorithm,
        });
        const allowed = [];
        for (let i = 0; i < 3; i++) allowed.push((await single.consume('tenant')).allowed);
        expect(allowed).toEqual([true, true, false]);
        await single.close();
      }
      const mixed = [];
      for (let i = 0; i < 4; i++) {
        const decision = await limiter.consume('tenant', { tier: 'MIXED' });
        expect(decision.degraded).toBeUndefined();
        mixed.push(decision.allowed);
      }
      expect(mixed).toEqual([true, true, true, false]);
      await limiter.reset('tenant');
      expect((await limiter.peek('tenant', { tier: 'MIXED' })).remaining).toBe(3);
      await limiter.close();
    },
  );

  it.each([
    ['a plain identity', 'tenant-7'],
    ['an identity stored as its fingerprint', 'Ünïcode tenant {with braces}'],
  ])('keeps every key of %s in one slot, on the master serving it', async (_, identity) => {
    const client = connectCluster();
    const prefix = uniquePrefix('slot');
    const policies: PolicyOptions[] = ALGORITHMS.map((algorithm) => ({
      name: algorithm,
      limit: 3,
      window: '1h',
      algorithm,
    }));
    const limiter = createLimiter({ ...STRICT, redis: client, prefix, policies });
    expect((await limiter.consume(identity)).allowed).toBe(true);

    const placed = [...(await keysByMaster(client, prefix))].filter(([, keys]) => keys.length);
    expect(placed).toHaveLength(1);
    const [port, keys] = placed[0] as [number, string[]];
    expect(keys).toHaveLength(ALGORITHMS.length);
    const slots = new Set(await cluster.keySlots(keys));
    expect(slots.size).toBe(1);
    expect(await masterPortOf([...slots])).toEqual([port]);
    await limiter.close();
  });

  it('spreads identities over every master, each holding the keys its slots say', async () => {
    const client = connectCluster();
    const prefix = uniquePrefix('spread');
    const limiter = createLimiter({ ...STRICT, redis: client, prefix, limit: 5, window: '1h' });
    const identities = Array.from({ length: 300 }, (_, i) => `tenant-${i}`);
    const slots = await cluster.keySlots(identities);
    // The slot ioredis computes is the one the cluster computes (failover tests rely on it).
    expect(identities.map(keySlot)).toEqual(slots);
    const ports = await masterPortOf(slots);
    const expected = new Map<number, number>();
    for (const port of ports) expected.set(port, (expected.get(port) ?? 0) + 1);
    // 300 identities over 16384 slots in three equal ranges: each master gets a fair share.
    expect(expected.size).toBe(3);
    for (const count of expected.values()) expect(count).toBeGreaterThanOrEqual(75);

    await Promise.all(identities.map((identity) => limiter.consume(identity)));
    const placed = await keysByMaster(client, prefix);
    expect(new Map([...placed].map(([port, keys]) => [port, keys.length]))).toEqual(expected);
    await limiter.close();
  });

  it('refuses a joint consume whose keys are in different slots, alone, and decides those in one', async () => {
    const client = connectCluster();
    const errors: unknown[] = [];
    const limiter = createLimiter({
      redis: client,
      prefix: uniquePrefix('joint'),
      limit: 5,
      window: '1h',
      onError: (error) => errors.push(error),
    });
    const policies: PolicyOptions[] = [
      { name: 'a', limit: 5, window: '1h' },
      { name: 'b', limit: 5, window: '1h' },
    ];
    // Two identities in different slots, and two keys of one identity, which share its slot.
    expect(keySlot('{tenant-1}')).not.toBe(keySlot('{tenant-2}'));
    const [across, beside, together] = await Promise.all([
      limiter.consumeJointly(['tenant-1', 'tenant-2'], { policies }),
      // In the slot of the first's first key: the batch it would have joined.
      limiter.consume('tenant-1'),
      limiter.consumeJointly(['tenant-4', 'tenant-4'], { policies }),
    ]);
    // The one across slots is answered by the failure mode, the others by Redis as usual.
    expect(across).toMatchObject({ allowed: true, degraded: 'allow' });
    expect(across.error?.message).toMatch(/different Cluster hash slots/);
    expect(beside).toMatchObject({ allowed: true, remaining: 4 });
    expect(beside.degraded).toBeUndefined();
    expect(together.degraded).toBeUndefined();
    expect(together.policies.map((p) => p.remaining)).toEqual([4, 4]);
    expect(errors).toHaveLength(1);
    await limiter.close();
  });

  /** Fires 1000 consumes for one identity at once, round-robin over a limiter per client. */
  /** `clock`, if given, is the one the scripts run on instead of Redis's. */
  async function race(
    {
      clock,
      ...options
    }: Omit<LimiterOptions, 'redis' | 'store' | 'prefix'> & { clock?: () => number },
    clients: readonly Cluster[],
  ) {
    const prefix = uniquePrefix('cluster-race');
    const limiters = clients.map((client) =>
      createLimiter({ ...options, ...STRICT, prefix, ...onRedis(client, { clock }) }),
    );
    const decisions = await Promise.all(
      Array.from({ length: 1000 }, (_, i) =>
        (limiters[i % limiters.length] as (typeof limiters)[number]).consume('tenant'),
      ),
    );
    const after = await (limiters[0] as (typeof limiters)[number]).peek('tenant');
    await Promise.all(limiters.map((limiter) => limiter.close()));
    return { tallied: tally(decisions), after };
  }

  describe.each(Object.entries(LOADS))('from a cold start %s', (_, load) => {
    it('admits exactly 60 of 1000 concurrent calls over 4 new clients with two policies, none degraded', () =>
      load(async () => {
        // No master has the script: the burst meets NOSCRIPT, as after a restart or a failover.
        await onEveryMaster(async (master) => {
          await master.script('FLUSH');
          await master.config('RESETSTAT');
        });
        // New clients: each learns the slots and connects to the masters as the burst is fired.
        const clients = Array.from({ length: 4 }, (_, i) =>
          connectCluster(CLIENTS[i % 2] as ClientName),
        );
        const { tallied, after } = await race({ policies: TWO_POLICIES }, clients);
        expect(tallied).toEqual({ admitted: 60, degraded: 0 });
        expect(after.policies.map((p) => [p.policy, p.remaining])).toEqual([
          ['hourly', 40],
          ['burst', 0],
        ]);
        // The burst was cold, and loaded the batch script once per client at most, not once per
        // call; the peek after it goes alone, and may load the single-call script once more.
        const evals = await onEveryMaster(async (master) => {
          const stats = await master.info('commandstats');
          return Number(/^cmdstat_eval:calls=(\d+)/m.exec(stats)?.[1] ?? 0);
        });
        const loads = evals.reduce((sum, calls) => sum + calls, 0);
        expect(loads).toBeGreaterThanOrEqual(1);
        expect(loads).toBeLessThanOrEqual(clients.length + 1);
      }));
  });

  describe('1000 concurrent requests over 8 cluster clients at limit 100', () => {
    // Four ioredis 6 and four ioredis 5 clients, each with its own connections to every master.
    const racers = (): Cluster[] =>
      Array.from({ length: 8 }, (_, i) => connectCluster(CLIENTS[i % 2] as ClientName));
    // A frozen clock makes window boundaries irrelevant; the race itself is real.
    const frozen = Date.UTC(2026, 5, 15, 12, 30);

    it.each(ALGORITHMS)(
      'admit exactly 100 with %s, none degraded',
      async (algorithm: Algorithm) => {
        const { tallied } = await race(
          { limit: 100, window: '1h', algorithm, clock: () => frozen },
          racers(),
        );
        expect(tallied).toEqual({ admitted: 100, degraded: 0 });
      },
    );

    it('admit exactly the tightest limit of two policies, none degraded, consuming from neither past it', async () => {
      const { tallied, after } = await race({ policies: TWO_POLICIES }, racers());
      expect(tallied).toEqual({ admitted: 60, degraded: 0 });
      expect(after.policies.map((p) => [p.policy, p.remaining])).toEqual([
        ['hourly', 40],
        ['burst', 0],
      ]);
    });

    it('let a read-decide-write limiter overshoot, which shows the race is real', async () => {
      const key = `{${uniquePrefix('naive')}}:tenant`;
      const naive = racers().map((client) =>
        naiveTokenBucket(client as unknown as Redis, 100, 3_600_000),
      );
      const admitted = await Promise.all(
        Array.from({ length: 1000 }, (_, i) =>
          (naive[i % naive.length] as (typeof naive)[number])(key),
        ),
      );
      expect(admitted.filter(Boolean).length).toBeGreaterThan(100);
    });
  });
});
