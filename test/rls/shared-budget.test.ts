// One budget for a tenant, counted by an Express app and by sentinel-rls for an Envoy mesh: the
// app keys its limiter with descriptorKey and names its policy as the rate_limit is named.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { awayFromWindowEdge } from '../../examples/race-demo/fleet.ts';
import { descriptorKey } from '../../packages/core/src/index.ts';
import type { RunningApp } from '../adapters/driver.ts';
import { driver } from '../adapters/express.ts';
import { uniquePrefix } from '../harness/clients.ts';
import { configFile, type RlsClient, type RlsProcess, rlsClient, startRls } from './rls-process.ts';

const LIMIT = 20;
const prefix = uniquePrefix('shared');
let rls: RlsProcess;
let client: RlsClient;
let app: RunningApp;
let redis: Redis;

beforeAll(async () => {
  const config = configFile(`
domain: shop
descriptors:
  - key: tenant
    rate_limit: { name: tenant, unit: minute, requests_per_unit: ${LIMIT} }
`);
  rls = await startRls(['--config', config], { REDIS_URL: inject('redisUrl'), PREFIX: prefix });
  client = rlsClient(rls.grpcPort);
  redis = new Redis(inject('redisUrl'));
  app = await driver.start({
    options: {
      redis,
      prefix,
      // The descriptor's limit, as a policy of the rate_limit's name.
      name: 'tenant',
      limit: LIMIT,
      window: '1m',
      algorithm: 'fixed-window',
      identify: (req) => ({
        key: descriptorKey('shop', [{ key: 'tenant', value: String(req.headers['x-tenant']) }]),
      }),
    },
  });
});

afterAll(async () => {
  client?.close();
  await app?.close();
  await rls?.stop();
  redis?.disconnect();
});

it(`admits exactly ${LIMIT} of 60 requests for one tenant, split between Express and gRPC`, async () => {
  // A minute's window that rolled over mid-test would rightly admit a second ${LIMIT}.
  await awayFromWindowEdge(redis, 60_000);
  const calls = Array.from({ length: 60 }, (_, i) =>
    i % 2 === 0
      ? fetch(`${app.url}/`, { headers: { 'x-tenant': 'acme' } }).then((r) => r.status === 200)
      : client
          .shouldRateLimit('shop', [{ entries: [{ key: 'tenant', value: 'acme' }] }])
          .then((a) => a.overall_code === 'OK'),
  );
  const admitted = (await Promise.all(calls)).filter(Boolean);
  expect(admitted).toHaveLength(LIMIT);
  // Both sides see the one budget spent.
  const status = (await fetch(`${app.url}/`, { headers: { 'x-tenant': 'acme' } })).status;
  expect(status).toBe(429);
});
