// sentinel-rls under REDIS_TYPE=sentinel, on a master, a replica and three sentinels with
// passwords: exact limits through the master the sentinels name, every call answered while the
// master is killed under load, and exact limits again on the promoted replica.
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { uniquePrefix } from '../harness/clients.ts';
import { type SentinelGroup, startSentinelGroup } from '../harness/redis-sentinel.ts';
import { configFile, type RlsClient, type RlsProcess, rlsClient, startRls } from './rls-process.ts';

const LIMIT = 20;
const CALLS = 100;
const PASSWORD = 'master-s3cret';
const SENTINEL_PASSWORD = 'sentinel-s3cret';
// A token bucket of a day refills one token in 72 minutes: nothing within the test, and no
// window boundary that a fixed window could cross between the two halves.
const CONFIG = `
domain: edge
descriptors:
  - key: tenant
    rate_limit: { unit: day, requests_per_unit: ${LIMIT}, algorithm: token-bucket }
  - key: route
    rate_limit: { unit: second, requests_per_unit: 1000000 }
`;
const TENANT = (value: string) => [{ entries: [{ key: 'tenant', value }] }];
const ROUTE = [{ entries: [{ key: 'route', value: '/r' }] }];

let group: SentinelGroup;
let rls: RlsProcess;
let client: RlsClient;

beforeAll(async () => {
  group = await startSentinelGroup({
    sentinels: 3,
    downAfterMs: 500,
    failoverTimeoutMs: 5_000,
    auth: { password: PASSWORD, sentinelPassword: SENTINEL_PASSWORD },
  });
  rls = await startRls(['--config', configFile(CONFIG)], {
    REDIS_TYPE: 'sentinel',
    REDIS_URL: [group.name, ...group.sentinels.map((s) => `${s.host}:${s.port}`)].join(','),
    // Both of upstream's forms: user:password for the servers, a password for the sentinels.
    REDIS_AUTH: `default:${PASSWORD}`,
    REDIS_SENTINEL_AUTH: SENTINEL_PASSWORD,
    PREFIX: uniquePrefix('rls-sentinel'),
    // Headers come only with an answer from Redis, never with the failure mode's.
    LIMIT_RESPONSE_HEADERS_ENABLED: 'true',
  });
  client = rlsClient(rls.grpcPort);
}, 60_000);

afterAll(async () => {
  client?.close();
  await rls?.stop();
  await group?.stop();
});

/** A server of the group, with the servers' password. */
function admin(port: number): Redis {
  const redis = new Redis({ host: '127.0.0.1', port, password: PASSWORD, lazyConnect: true });
  redis.on('error', () => {});
  return redis;
}

interface Answer {
  readonly started: number;
  readonly ms: number;
  /** OK, OVER_LIMIT, or the gRPC error's message. */
  readonly code: string;
  /** Decided by Redis: the answer carries headers, which the failure mode's never do. */
  readonly fromRedis: boolean;
}

async function ask(descriptors: ReturnType<typeof TENANT>): Promise<Answer> {
  const started = performance.now();
  try {
    const answer = await client.shouldRateLimit('edge', descriptors, 0, 2_000);
    return {
      started,
      ms: performance.now() - started,
      code: answer.overall_code,
      fromRedis: answer.response_headers_to_add.length > 0,
    };
  } catch (error) {
    return { started, ms: performance.now() - started, code: String(error), fromRedis: false };
  }
}

async function storeErrors(): Promise<number> {
  const metrics = await (await fetch(`http://127.0.0.1:${rls.httpPort}/metrics`)).text();
  const count = /^sentinel_rls_store_errors_total (\d+)$/m.exec(metrics)?.[1];
  if (count === undefined) throw new Error(`no sentinel_rls_store_errors_total in ${metrics}`);
  return Number(count);
}

/** `CALLS` concurrent calls for one tenant. */
function burst(tenant: string): Promise<Answer[]> {
  return Promise.all(Array.from({ length: CALLS }, () => ask(TENANT(tenant))));
}

it(`answers exactly ${LIMIT} of ${CALLS} concurrent calls OK through the master the sentinels name`, async () => {
  await expect.poll(async () => (await ask(ROUTE)).fromRedis, { timeout: 10_000 }).toBe(true);
  const answers = await burst('acme');
  expect(answers.filter((a) => a.code === 'OK')).toHaveLength(LIMIT);
  expect(answers.filter((a) => a.code === 'OVER_LIMIT')).toHaveLength(CALLS - LIMIT);
  expect(answers.every((a) => a.fromRedis)).toBe(true);
  // The counts are on the replica before its master dies: the test of what survives a failover
  // is then not a race with replication (which a real failover can lose, asynchronous as it is).
  const master = admin(group.master.port);
  try {
    expect(await master.call('WAIT', 1, 5_000)).toBe(1);
  } finally {
    master.disconnect();
  }
});

it('answers every call within its deadline while the master is killed under load, then limits exactly on the promoted replica', async () => {
  const errorsBefore = await storeErrors();
  const answers: Answer[] = [];
  // Set by the load's callbacks, which flow analysis does not follow into.
  const at: { killed?: number; resumed?: number } = {};
  const begun = performance.now();
  const done = () =>
    (at.resumed !== undefined && performance.now() > at.resumed + 1_000) ||
    performance.now() - begun > 40_000;
  // 16 calls in flight at all times; the master is killed a second in.
  const load = Array.from({ length: 16 }, async () => {
    while (!done()) {
      const answer = await ask(ROUTE);
      answers.push(answer);
      if (at.killed !== undefined && answer.started > at.killed && answer.fromRedis) {
        at.resumed ??= performance.now();
      }
    }
  });
  await sleep(1_000);
  await group.master.stop();
  at.killed = performance.now();
  await Promise.all(load);

  const killed = at.killed;
  const resumed = at.resumed;
  if (resumed === undefined) throw new Error('no answer from Redis within 40 s of the kill');
  const afterKill = answers.filter((a) => a.started > killed);
  // Every call was answered OK, by Redis or by the failure mode (open), none with a gRPC error.
  expect(answers.filter((a) => a.code !== 'OK')).toEqual([]);
  // The deadline is REDIS_TIMEOUT_MS (50 ms); twenty times it bounds every answer, a busy
  // machine's scheduling included, and stays within the client's own deadline of 2 s.
  expect(Math.max(...answers.map((a) => a.ms))).toBeLessThan(1_000);
  // While the sentinels judged the master down and promoted the replica, the failure mode
  // answered, and each of its answers was counted as a store error.
  expect(afterKill.some((a) => !a.fromRedis)).toBe(true);
  expect((await storeErrors()) - errorsBefore).toBe(answers.filter((a) => !a.fromRedis).length);
  // Then Redis again: the replica is the master, and every call since answers from it.
  expect(await group.masterPort()).toBe(group.replica.port);
  const promoted = admin(group.replica.port);
  try {
    expect(await promoted.info('replication')).toContain('role:master');
  } finally {
    promoted.disconnect();
  }
  const settled = answers.filter((a) => a.started > resumed + 200);
  expect(settled.length).toBeGreaterThan(0);
  expect(settled.every((a) => a.fromRedis)).toBe(true);

  // The tenant spent before the failover stays spent, as replicated; a new one gets exactly
  // its limit, every answer from Redis, none counted as a store error.
  const errorsSettled = await storeErrors();
  const spent = await burst('acme');
  expect(spent.filter((a) => a.code === 'OK')).toHaveLength(0);
  const fresh = await burst('globex');
  expect(fresh.filter((a) => a.code === 'OK')).toHaveLength(LIMIT);
  expect([...spent, ...fresh].every((a) => a.fromRedis)).toBe(true);
  expect(await storeErrors()).toBe(errorsSettled);
}, 90_000);
