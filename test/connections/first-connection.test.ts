// Calls made before a client's first connection: they wait for it up to connectTimeout, and are never sent late.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLimiter, type Decision, type SentinelError } from '../../packages/core/src/index.ts';
import { NODE_REDIS, unconnected } from '../harness/client-libraries.ts';
import { connect, uniquePrefix } from '../harness/clients.ts';
import { STEADY } from '../harness/connection-checks.ts';
import { type RedisProcess, startRedis } from '../harness/redis-server.ts';

let server: RedisProcess;
let admin: Redis;

beforeAll(async () => {
  server = await startRedis();
  admin = connect('ioredis 6', server.url);
});
afterAll(async () => {
  await server?.stop();
});

/** Whether `promise` is still unsettled after a turn of the event loop. */
async function isPending(promise: Promise<unknown>): Promise<boolean> {
  const marker = Symbol('pending');
  return (await Promise.race([promise, sleep(0, marker)])) === marker;
}

/** The Redis key of a one-policy limiter at 2 per day: `<prefix>:{tenant}:2-per-1d:token-bucket`. */
const keyOf = (prefix: string) => `${prefix}:{tenant}:2-per-1d:token-bucket`;

describe.each(NODE_REDIS)('a %s client the user has yet to connect', (library) => {
  it('holds a call until the user connects within connectTimeout, then counts it', async () => {
    const { client, connect: userConnects } = unconnected(library, server.url);
    const prefix = uniquePrefix('first');
    const limiter = createLimiter({
      redis: client,
      prefix,
      limit: 2,
      window: '1d',
      connectTimeout: 5_000,
      ...STEADY,
    });
    const early = limiter.consume('tenant');
    await sleep(300);
    expect(await isPending(early)).toBe(true);
    await userConnects();
    const decision = await early;
    expect(decision).toMatchObject({ allowed: true, remaining: 1 });
    expect(decision.degraded).toBeUndefined();
    expect(await admin.exists(keyOf(prefix))).toBe(1);
    await limiter.close();
  });

  it('fails open after connectTimeout, and a late connection never sends the call', async () => {
    const { client, connect: userConnects } = unconnected(library, server.url);
    const prefix = uniquePrefix('first');
    const errors: SentinelError[] = [];
    const limiter = createLimiter({
      redis: client,
      prefix,
      limit: 2,
      window: '1d',
      connectTimeout: 200,
      onError: (error) => errors.push(error),
    });
    const started = performance.now();
    const decision: Decision = await limiter.consume('tenant');
    expect(performance.now() - started).toBeGreaterThanOrEqual(190);
    expect(decision).toMatchObject({ allowed: true, degraded: 'allow' });
    expect(errors.map((error) => error.code)).toEqual(['STORE_UNAVAILABLE']);
    await userConnects();
    // Give a wrongly kept call time to go out once the connection is ready.
    await sleep(200);
    expect(await admin.exists(keyOf(prefix))).toBe(0);
    // The store is live from now on.
    expect((await limiter.consume('tenant')).degraded).toBeUndefined();
    expect(await admin.exists(keyOf(prefix))).toBe(1);
    await limiter.close();
  });
});

describe.each(['ioredis 6', 'ioredis 5', 'iovalkey'] as const)('a lazy %s client', (library) => {
  it('is connected by the store, which counts the first call', async () => {
    const { client } = unconnected(library, server.url);
    const prefix = uniquePrefix('lazy');
    const limiter = createLimiter({
      redis: client,
      prefix,
      limit: 2,
      window: '1d',
      connectTimeout: 5_000,
      ...STEADY,
    });
    const decision = await limiter.consume('tenant');
    expect(decision).toMatchObject({ allowed: true, remaining: 1 });
    expect(decision.degraded).toBeUndefined();
    expect(await admin.exists(keyOf(prefix))).toBe(1);
    await limiter.close();
  });
});
