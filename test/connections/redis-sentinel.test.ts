// Redis Sentinel (high availability) through ioredis's own support: limiting, failover, and limiting again.
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLimiter, type Decision, type SentinelError } from '../../packages/core/src/index.ts';
import { connect, uniquePrefix } from '../harness/clients.ts';
import { admittedOf } from '../harness/connection-checks.ts';
import { type SentinelGroup, startSentinelGroup } from '../harness/redis-sentinel.ts';

let group: SentinelGroup;
let client: Redis;

beforeAll(async () => {
  group = await startSentinelGroup({ downAfterMs: 500, failoverTimeoutMs: 5_000 });
}, 30_000);
afterAll(async () => {
  client?.disconnect();
  await group?.stop();
});

/** The README's configuration: the client asks the sentinels where the master is. */
function sentinelClient(): Redis {
  const redis = new Redis({
    sentinels: [{ host: group.sentinel.host, port: group.sentinel.port }],
    name: group.name,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    autoResendUnfulfilledCommands: false,
    // Ask the sentinels again soon after losing the master, so limiting resumes quickly.
    retryStrategy: (attempt) => Math.min(attempt * 100, 500),
  });
  redis.on('error', () => {});
  return redis;
}

describe('a limiter on an ioredis client connected through Redis Sentinel', () => {
  it('limits on the master, fails open while the sentinel promotes the replica, then limits there', async () => {
    client = sentinelClient();
    const prefix = uniquePrefix('ha');
    const key = `${prefix}:{tenant}:5-per-1d:token-bucket`;
    const errors: SentinelError[] = [];
    const limiter = createLimiter({
      redis: client,
      prefix,
      limit: 5,
      window: '1d',
      // The failover, not a slow machine, must be what degrades calls here.
      timeout: 1_000,
      connectTimeout: 5_000,
      breaker: { failures: 3, cooldownMs: 200 },
      onError: (error) => errors.push(error),
    });
    expect(await admittedOf(() => limiter.consume('tenant'), 2)).toEqual([true, true]);
    expect(errors).toEqual([]);
    // The two requests reached the replica before the master dies.
    const replica = connect('ioredis 6', group.replica.url);
    await expect.poll(() => replica.exists(key), { timeout: 5_000 }).toBe(1);

    await group.master.stop();
    const started = performance.now();
    const during: Decision[] = [];
    let resumed: Decision | undefined;
    while (!resumed) {
      if (performance.now() - started > 25_000) throw new Error('no failover within 25 s');
      const decision = await limiter.consume('tenant');
      if (decision.degraded === undefined) resumed = decision;
      else {
        during.push(decision);
        await sleep(50);
      }
    }
    // While the sentinel judged the master down and promoted the replica, every call came back,
    // admitted by the fail-open path; none threw.
    expect(during.length).toBeGreaterThan(0);
    for (const decision of during)
      expect(decision).toMatchObject({ allowed: true, degraded: 'allow' });
    for (const error of errors)
      expect(['STORE_UNAVAILABLE', 'STORE_TIMEOUT']).toContain(error.code);

    // The replica is the master now, with the state it had replicated: 2 before, 1 now.
    expect(await group.masterPort()).toBe(group.replica.port);
    expect(await replica.info('replication')).toContain('role:master');
    expect(resumed).toMatchObject({ allowed: true, remaining: 2 });
    expect(await admittedOf(() => limiter.consume('tenant'), 3)).toEqual([true, true, false]);
    await limiter.close();
  });
});
