// Redis Cluster: every algorithm and multi-policy script runs without CROSSSLOT, and holds under a race.
import { Cluster } from 'ioredis';
import { Cluster as Cluster5 } from 'ioredis5';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uniquePrefix } from '../../../test/harness/clients.ts';
import { type RedisCluster, startCluster } from '../../../test/harness/redis-cluster.ts';
import { ALGORITHMS, createLimiter, type PolicyOptions } from '../src/index.ts';

let cluster: RedisCluster;
const clients: Cluster[] = [];

function connectCluster(version: 5 | 6 = 6): Cluster {
  const client =
    version === 6
      ? new Cluster([...cluster.seeds])
      : (new Cluster5([...cluster.seeds]) as unknown as Cluster);
  client.on('error', () => {});
  clients.push(client);
  return client;
}

beforeAll(async () => {
  cluster = await startCluster({ masters: 3 });
}, 60_000);

afterAll(async () => {
  await Promise.all(clients.map((client) => client.quit().catch(() => client.disconnect())));
  await cluster?.stop();
});

describe('on a three-master Redis Cluster', () => {
  it.each([5, 6] as const)(
    'runs every algorithm and a mixed tier through ioredis %i',
    async (version) => {
      const policies: PolicyOptions[] = ALGORITHMS.map((algorithm) => ({
        name: algorithm,
        limit: 3,
        window: '1h',
        algorithm,
      }));
      const limiter = createLimiter({
        redis: connectCluster(version),
        prefix: uniquePrefix('cluster'),
        timeout: 10_000,
        tiers: { FREE: { limit: 2, window: '1h' }, MIXED: policies },
        onError: (error) => {
          throw error;
        },
      });
      for (const algorithm of ALGORITHMS) {
        const single = createLimiter({
          redis: connectCluster(version),
          prefix: uniquePrefix('cluster'),
          timeout: 10_000,
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

  it('spreads identities over every master', async () => {
    const client = connectCluster();
    const prefix = uniquePrefix('spread');
    const limiter = createLimiter({
      redis: client,
      prefix,
      limit: 5,
      window: '1h',
      timeout: 10_000,
    });
    for (let i = 0; i < 300; i++) await limiter.consume(`tenant-${i}`);
    const perMaster = await Promise.all(client.nodes('master').map((node) => node.dbsize()));
    expect(perMaster).toHaveLength(3);
    expect(perMaster.reduce((sum, keys) => sum + keys, 0)).toBeGreaterThanOrEqual(300);
    // With 300 identities hashed over 16384 slots, each master holds a fair share.
    for (const keys of perMaster) expect(keys).toBeGreaterThan(50);
    await limiter.close();
  });

  it('admits exactly 100 of 1000 concurrent requests over 8 cluster clients', async () => {
    const prefix = uniquePrefix('race');
    const limiters = Array.from({ length: 8 }, () =>
      createLimiter({
        redis: connectCluster(),
        prefix,
        limit: 100,
        window: '1h',
        // Atomicity is measured here, not the deadline: a loaded machine must not decide it.
        timeout: 10_000,
      }),
    );
    const decisions = await Promise.all(
      Array.from({ length: 1000 }, (_, i) =>
        (limiters[i % 8] as (typeof limiters)[number]).consume('tenant'),
      ),
    );
    expect(decisions.filter((d) => d.allowed)).toHaveLength(100);
    expect(decisions.filter((d) => d.degraded)).toHaveLength(0);
    await Promise.all(limiters.map((limiter) => limiter.close()));
  });
});
