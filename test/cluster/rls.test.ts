// sentinel-rls on a 3+3 Redis Cluster: exactly the limit across two processes, each
// descriptor's bucket on the master of its own hash slot.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { uniquePrefix } from '../harness/clients.ts';
import { type RedisCluster, startCluster } from '../harness/redis-cluster.ts';
import {
  configFile,
  type RlsClient,
  type RlsProcess,
  rlsClient,
  startRls,
} from '../rls/rls-process.ts';

const LIMIT = 100;
const CALLS = 1000;
let cluster: RedisCluster;
const fleet: RlsProcess[] = [];
const clients: RlsClient[] = [];

beforeAll(async () => {
  cluster = await startCluster({ masters: 3, replicas: 1 });
  const config = configFile(`
domain: edge
descriptors:
  - key: tenant
    rate_limit: { unit: hour, requests_per_unit: ${LIMIT} }
  - key: route
    rate_limit: { unit: hour, requests_per_unit: 1000000 }
`);
  const env = {
    REDIS_TYPE: 'cluster',
    REDIS_URL: cluster.seeds.map((s) => `${s.host}:${s.port}`).join(','),
    PREFIX: uniquePrefix('rls-cluster'),
  };
  fleet.push(...(await Promise.all([0, 1].map(() => startRls(['--config', config], env)))));
  clients.push(...fleet.map((p) => rlsClient(p.grpcPort)));
}, 90_000);

afterAll(async () => {
  for (const client of clients) client.close();
  await Promise.all(fleet.map((p) => p.stop()));
  await cluster?.stop();
});

it(`answers exactly ${LIMIT} of ${CALLS} concurrent calls OK for each of several tenants`, async () => {
  // Tenants whose buckets land on different masters.
  const tenants = ['acme', 'globex', 'initech'];
  for (const tenant of tenants) {
    const answers = await Promise.all(
      Array.from({ length: CALLS }, (_, i) =>
        (clients[i % clients.length] as RlsClient).shouldRateLimit('edge', [
          { entries: [{ key: 'tenant', value: tenant }] },
          { entries: [{ key: 'route', value: '/r' }] },
        ]),
      ),
    );
    expect(answers.filter((a) => a.overall_code === 'OK')).toHaveLength(LIMIT);
    expect(answers.every((a) => a.statuses.length === 2)).toBe(true);
  }
});
