// The gateway on the run's real Redis: REDIS_URL alone moves its limits there, shared by every instance.

import type { AddressInfo } from 'node:net';
import { createServer } from 'node:net';
import { describe, expect, inject, it } from 'vitest';
import { connect, uniquePrefix } from '../harness/clients.ts';
import { waitForValue } from '../harness/wait-for.ts';
import { configFile, startGateway } from './gateway-process.ts';

const FREE = { 'x-api-key': 'demo-free-key' };

describe('the gateway with REDIS_URL', () => {
  it('shares the FREE limit between two gateway processes on one Redis, and reports Redis ready', async () => {
    // A prefix of its own: the demo keys' budgets on the shared Redis are this test's alone.
    const prefix = uniquePrefix('gateway');
    const env = {
      REDIS_URL: inject('redisUrl'),
      SENTINEL_CONFIG: configFile('gateway.yaml', `prefix: ${prefix}\n`),
    };
    const [first, second] = await Promise.all([startGateway(env), startGateway(env)]);
    expect(first.output().stdout).toContain('store:    Redis (REDIS_URL)');

    // Both, since the requests below alternate between them: a gateway still connecting when
    // its first request comes would decide it without Redis after connectTimeout (500 ms).
    for (const gateway of [first, second]) {
      const ready = await waitForValue(
        async () => {
          const response = await fetch(`${gateway.url}/readyz`);
          const body = (await response.json()) as { redis: string };
          return response.status === 200 && body.redis === 'ready' && body;
        },
        20_000,
        'the gateway reporting Redis ready',
      );
      expect(ready).toMatchObject({ status: 'ready', redis: 'ready', breakerOpen: false });
    }

    const statuses = [];
    for (let i = 0; i < 11; i++) {
      const gateway = i % 2 === 0 ? first : second;
      const response = await fetch(`${gateway.url}/hello`, { headers: FREE });
      statuses.push(response.status);
      // Every decision came from Redis: an admission by the failure mode would claim no quota.
      if (response.status === 200) {
        // The gateway logs the first store error of each kind: it says why, should this fail.
        expect(response.headers.get('ratelimit'), JSON.stringify(gateway.output())).not.toBeNull();
      }
    }
    expect(statuses).toEqual([...Array(10).fill(200), 429]);

    const redis = connect();
    const keys = await redis.keys(`${prefix}:*`);
    expect(keys).toEqual([`${prefix}:{tenant:demo-free}:free-minute:1m:token-bucket`]);
    expect(keys.join()).not.toContain('demo-free-key');

    // A clean shutdown closes the Redis client as well as the server.
    first.child.kill('SIGTERM');
    second.child.kill('SIGTERM');
    expect(await Promise.all([first.exited, second.exited])).toEqual([0, 0]);
  });

  it('is not ready while Redis is out of reach under onStoreError deny, and stays ready under allow', async () => {
    // A port nothing listens on: the client keeps trying, and never connects.
    const env = { REDIS_URL: `redis://127.0.0.1:${await closedPort()}` };
    const [deny, allow] = await Promise.all([
      startGateway({ ...env, SENTINEL_ON_STORE_ERROR: 'deny' }),
      startGateway(env),
    ]);
    const denied = await fetch(`${deny.url}/readyz`);
    expect(denied.status).toBe(503);
    expect(await denied.json()).toMatchObject({ status: 'not ready', onStoreError: 'deny' });
    expect((await fetch(`${deny.url}/hello`, { headers: FREE })).status).toBe(503);
    expect((await fetch(`${deny.url}/healthz`)).status).toBe(200);

    const allowed = await fetch(`${allow.url}/readyz`);
    expect(allowed.status).toBe(200);
    const body = (await allowed.json()) as { redis: string };
    expect(body.redis).not.toBe('ready');
    expect((await fetch(`${allow.url}/hello`, { headers: FREE })).status).toBe(200);

    // Closing a client that never connected does not hold up the shutdown.
    deny.child.kill('SIGTERM');
    allow.child.kill('SIGTERM');
    expect(await Promise.all([deny.exited, allow.exited])).toEqual([0, 0]);
  });

  it("reads and resets a key's quota in Redis from another gateway than the one that spent it", async () => {
    const token = 'test-admin-token-0123456789';
    const admin = { authorization: `Bearer ${token}` };
    const env = {
      REDIS_URL: inject('redisUrl'),
      SENTINEL_CONFIG: configFile('gateway.yaml', `prefix: ${uniquePrefix('gateway-admin')}\n`),
      SENTINEL_ADMIN_TOKEN: token,
    };
    const [spender, operator] = await Promise.all([startGateway(env), startGateway(env)]);
    const remaining = async () => {
      const response = await fetch(`${operator.url}/_sentinel/identities/demo-free-key`, {
        headers: admin,
      });
      // 503 while no answer from Redis is in: the quota is then unknown.
      if (response.status !== 200) return undefined;
      const body = (await response.json()) as { policies: { remaining: number }[] };
      return body.policies[0]?.remaining;
    };
    // The first call may wait for the connection; Redis answers every later one.
    await waitForValue(async () => (await remaining()) === 10, 20_000, 'a quota read from Redis');
    for (let i = 0; i < 10; i++) await fetch(`${spender.url}/hello`, { headers: FREE });
    expect(await remaining()).toBe(0);
    expect((await fetch(`${spender.url}/hello`, { headers: FREE })).status).toBe(429);

    const reset = await fetch(`${operator.url}/_sentinel/identities/demo-free-key`, {
      method: 'DELETE',
      headers: admin,
    });
    expect(reset.status).toBe(204);
    expect((await fetch(`${spender.url}/hello`, { headers: FREE })).status).toBe(200);
  });

  it('gives back what its quota leases hold when it stops on SIGTERM', async () => {
    const token = 'test-admin-token-0123456789';
    const key = 'bulk-key-0123456789';
    const config = [
      `prefix: ${uniquePrefix('gateway-leases')}`,
      'tiers:',
      '  FREE: { limit: 10, window: 1m }',
      '  BULK: { name: bulk, limit: 1000, window: 1h }',
      'keys:',
      `  ${key}: BULK`,
      'quotaLeases: { hotAt: 8 }',
      '',
    ].join('\n');
    const env = {
      REDIS_URL: inject('redisUrl'),
      SENTINEL_CONFIG: configFile('gateway.yaml', config),
      SENTINEL_ADMIN_TOKEN: token,
    };
    const [spender, operator] = await Promise.all([startGateway(env), startGateway(env)]);
    const remaining = async () => {
      const response = await fetch(`${operator.url}/_sentinel/identities/${key}`, {
        headers: { authorization: `Bearer ${token}` },
      });
      if (response.status !== 200) return undefined;
      const body = (await response.json()) as { policies: { remaining: number }[] };
      return body.policies[0]?.remaining;
    };
    await waitForValue(async () => (await remaining()) === 1000, 20_000, 'a quota read from Redis');
    // Hot: past 8 requests a second the gateway leases a share of the key's budget, larger as
    // its demand grows, and spends it without Redis.
    for (let i = 0; i < 40; i++) {
      const response = await fetch(`${spender.url}/hello`, { headers: { 'x-api-key': key } });
      expect(response.status).toBe(200);
    }
    // Redis counts the units the lease holds as spent, until it ends.
    expect(await remaining()).toBeLessThan(960);
    spender.child.kill('SIGTERM');
    expect(await spender.exited).toBe(0);
    expect(await remaining()).toBe(960);
  });

  it("answers 503 for a key's quota while Redis is out of reach, rather than a guess", async () => {
    const token = 'test-admin-token-0123456789';
    const { url } = await startGateway({
      REDIS_URL: `redis://127.0.0.1:${await closedPort()}`,
      SENTINEL_ADMIN_TOKEN: token,
    });
    const response = await fetch(`${url}/_sentinel/identities/demo-free-key`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(response.status).toBe(503);
    expect(response.headers.get('content-type')).toContain('application/problem+json');
    const reset = await fetch(`${url}/_sentinel/identities/demo-free-key`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${token}` },
    });
    expect(reset.status).toBe(503);
    expect(await reset.text()).not.toContain('127.0.0.1');
  });
});

/** A loopback port that was free a moment ago. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
