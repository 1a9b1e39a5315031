// Failure policy when Redis is down or unreachable: fail-open, deny, local, recovery, no replay.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis, RedisOptions } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { SentinelError } from '../packages/core/src/index.ts';
import {
  CLIENT_SETTINGS,
  clientOf,
  limiterOn,
  ownServer,
  RECOMMENDED,
  readyClient,
  timed,
  waitFor,
} from './harness/own-redis.ts';
import { freePort, type RedisProcess } from './harness/redis-server.ts';

/** Stops the server and waits until the client has noticed the lost connection. */
async function loseConnection(server: RedisProcess, client: Redis): Promise<void> {
  await server.stop();
  await waitFor(() => client.status !== 'ready');
}

describe.each(Object.entries(CLIENT_SETTINGS))('with %s', (_, settings) => {
  it('admits at once, degraded "allow", once the connection is lost', async () => {
    const server = await ownServer();
    const client = await readyClient(server, settings);
    const { warmUp, limiter, errors } = limiterOn(client);
    await warmUp();

    await loseConnection(server, client);
    const { value, ms } = await timed(limiter.consume('user'));
    expect(value).toMatchObject({ allowed: true, degraded: 'allow' });
    expect(ms).toBeLessThan(250);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(SentinelError);
    expect(errors[0]?.code).toBe('STORE_UNAVAILABLE');
  });

  it('settles a call made the moment the server dies within the deadline', async () => {
    const server = await ownServer();
    const client = await readyClient(server, settings);
    const { warmUp, limiter, errors } = limiterOn(client, { breaker: false });
    await warmUp();

    await server.stop();
    // The client may not have seen the close yet: the call can go out and meet the deadline.
    const { value, ms } = await timed(limiter.consume('user'));
    expect(value).toMatchObject({ allowed: true, degraded: 'allow' });
    expect(ms).toBeLessThan(250);
    expect(errors.map((error) => error.code)).toSatisfy((codes: string[]) =>
      codes.every((code) => code === 'STORE_UNAVAILABLE' || code === 'STORE_TIMEOUT'),
    );
    expect(errors).toHaveLength(1);
    // With default settings the call may sit in ioredis' offline queue; reconnect to drain it.
    await server.restart();
    await waitFor(() => client.status === 'ready');
  });

  it('degrades calls to a port nobody listens on within connectTimeout', async () => {
    const url = `redis://127.0.0.1:${await freePort()}`;
    const client = clientOf(url, settings);
    const { limiter, errors } = limiterOn(client, { connectTimeout: 200, breaker: false });

    const burst = await timed(Promise.all(Array.from({ length: 5 }, () => limiter.consume('u'))));
    expect(burst.value.every((d) => d.allowed && d.degraded === 'allow')).toBe(true);
    expect(burst.ms).toBeLessThan(200 + 250);
    // Later calls, whichever reconnect phase the client is in, stay within the same bound.
    for (let i = 0; i < 3; i++) {
      await sleep(60);
      const later = await timed(limiter.consume('u'));
      expect(later.value).toMatchObject({ allowed: true, degraded: 'allow' });
      expect(later.ms).toBeLessThan(200 + 250);
    }
    expect(errors).toHaveLength(8);
    expect(errors.every((e) => e instanceof SentinelError && e.code === 'STORE_UNAVAILABLE')).toBe(
      true,
    );
  });

  it('refuses with degraded "deny" when onStoreError is "deny"', async () => {
    const server = await ownServer();
    const client = await readyClient(server, settings);
    const { limiter, errors } = limiterOn(client, { onStoreError: 'deny' });
    await loseConnection(server, client);

    const decision = await limiter.consume('user');
    expect(decision).toMatchObject({ allowed: false, degraded: 'deny', remaining: 0 });
    expect(decision.retryAfterMs).toBeGreaterThan(0);
    expect(errors[0]?.code).toBe('STORE_UNAVAILABLE');
  });

  it('enforces the same policies in memory when onStoreError is "local"', async () => {
    const server = await ownServer();
    const client = await readyClient(server, settings);
    const { limiter, errors } = limiterOn(client, { onStoreError: 'local', limit: 5 });
    await loseConnection(server, client);

    // Sequential, so the first calls fail in the store and the rest skip it via the breaker.
    const decisions = [];
    for (let i = 0; i < 20; i++) decisions.push(await limiter.consume('user'));
    expect(decisions.every((d) => d.degraded === 'local')).toBe(true);
    expect(decisions.filter((d) => d.allowed)).toHaveLength(5);
    expect(decisions.slice(0, 5).map((d) => d.remaining)).toEqual([4, 3, 2, 1, 0]);
    expect(decisions[5]).toMatchObject({ allowed: false, limit: 5 });
    expect(decisions[5]?.retryAfterMs).toBeGreaterThan(0);

    const concurrent = await Promise.all(
      Array.from({ length: 20 }, () => limiter.consume('other')),
    );
    expect(concurrent.filter((d) => d.allowed)).toHaveLength(5);
    expect(concurrent.every((d) => d.degraded === 'local')).toBe(true);
    expect(errors.length).toBeGreaterThan(0);
  });

  // Bounded by the breaker's 1 s cool-down plus ioredis' reconnect backoff (50 ms doubling, with
  // up to 200 ms jitter), hence about 2 s.
  it('resumes limiting within about 2 s of a restart without a new limiter', async () => {
    const server = await ownServer();
    const client = await readyClient(server, settings);
    const { warmUp, limiter } = limiterOn(client);
    await warmUp();
    await loseConnection(server, client);
    expect((await limiter.consume('user')).degraded).toBe('allow');

    await server.restart();
    const restartedAt = Date.now();
    let decision = await limiter.consume('user');
    while (decision.degraded !== undefined && Date.now() - restartedAt < 5000) {
      await sleep(25);
      decision = await limiter.consume('user');
    }
    expect(decision.degraded).toBeUndefined();
    expect(Date.now() - restartedAt).toBeLessThan(2500);
    // The restarted server is empty and no call made while it was down reached it.
    expect(decision).toMatchObject({ allowed: true, remaining: 9 });
  });
});

describe('calls made while the connection is down', () => {
  async function assertNotReplayed(settings: RedisOptions, waitForClose: boolean): Promise<void> {
    const server = await ownServer();
    const client = await readyClient(server, settings);
    const { warmUp, limiter, prefix } = limiterOn(client, { breaker: false });
    await warmUp();

    if (waitForClose) await loseConnection(server, client);
    else await server.stop();
    expect((await limiter.consume('ghost')).degraded).toBe('allow');

    await server.restart();
    await waitFor(() => client.status === 'ready');
    await sleep(200);
    const admin = clientOf(server.url, {});
    expect(await admin.keys(`${prefix}:*`)).toEqual([]);
    // The check can see a key: a call made now does reach the restarted server.
    expect((await limiter.consume('ghost')).degraded).toBeUndefined();
    expect(await admin.keys(`${prefix}:*`)).toHaveLength(1);
  }

  it('are never replayed after reconnect with the recommended client settings', async () => {
    await assertNotReplayed(RECOMMENDED, false);
  });

  it('are never replayed once the client has seen the close, with default settings', async () => {
    await assertNotReplayed({}, true);
  });
});
