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

  it('waits connectTimeout once for a Redis down at start, then answers at once until it is up', async () => {
    const port = await freePort();
    const client = clientOf(`redis://127.0.0.1:${port}`, settings);
    const { limiter, errors } = limiterOn(client, { connectTimeout: 200, breaker: false });

    // The first calls wait for the first connection, in case it is only slow to come.
    const burst = await timed(Promise.all(Array.from({ length: 5 }, () => limiter.consume('u'))));
    expect(burst.value.every((d) => d.allowed && d.degraded === 'allow')).toBe(true);
    expect(burst.ms).toBeGreaterThanOrEqual(190);
    // From then on no call waits for it, whichever reconnect phase the client is in: the bound
    // is ten times the 5 ms a call may take, not the 200 ms wait.
    for (let i = 0; i < 50; i++) {
      if (i % 10 === 0) await sleep(30);
      const later = await timed(limiter.consume('u'));
      expect(later.value).toMatchObject({ allowed: true, degraded: 'allow' });
      expect(later.ms).toBeLessThan(50);
    }
    expect(errors).toHaveLength(55);
    expect(errors.every((e) => e instanceof SentinelError && e.code === 'STORE_UNAVAILABLE')).toBe(
      true,
    );

    // Limiting resumes once Redis is up, without a new limiter.
    await ownServer(port);
    await waitFor(async () => (await limiter.consume('u')).degraded === undefined);
    expect(await limiter.consume('fresh')).toMatchObject({ allowed: true, remaining: 9 });
  });

  // The client's reconnect delay decides how soon it sees Redis (ioredis's default backoff grows
  // 50 ms an attempt); the breaker, open by then, lets a call through as soon as it is connected.
  it('limits again within 2 s of a Redis down at start coming up, breaker and all', async () => {
    const port = await freePort();
    const client = clientOf(`redis://127.0.0.1:${port}`, settings);
    const { limiter } = limiterOn(client, { connectTimeout: 200 });
    for (let i = 0; i < 20; i++) expect((await limiter.consume('u')).degraded).toBe('allow');

    await ownServer(port);
    const upAt = performance.now();
    let decision = await limiter.consume('u');
    while (decision.degraded !== undefined && performance.now() - upAt < 5_000) {
      await sleep(10);
      decision = await limiter.consume('u');
    }
    expect(decision.degraded).toBeUndefined();
    expect(performance.now() - upAt).toBeLessThan(2_000);
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

  // Bounded by ioredis' reconnect backoff: the breaker lets a call through as soon as the client
  // is connected again, rather than after its 1 s cool-down.
  it('resumes limiting within 2 s of a restart without a new limiter', async () => {
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
    expect(Date.now() - restartedAt).toBeLessThan(2_000);
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
