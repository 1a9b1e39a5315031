// The client a limiter builds from redisUrl, while Redis is down or paused: quiet logs, and a close that ends it.
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { afterEach, expect, it, vi } from 'vitest';
import { createRedisClient } from '../../packages/core/src/index.ts';
import { driver as express } from '../adapters/express.ts';
import { driver as koa } from '../adapters/koa.ts';
import { printedByUnheardClient } from '../harness/connection-checks.ts';
import { faultApp, ownRedis } from './apps.ts';

afterEach(() => {
  vi.restoreAllMocks();
});

it('writes nothing to the console while its client reconnects to a Redis that is down', async () => {
  const server = await ownRedis();
  const app = await faultApp(koa, server);
  const logged = vi.spyOn(console, 'error').mockImplementation(() => {});
  await server.stop();
  // Long enough for a few reconnection attempts (100, 200, 300 ms apart).
  for (let i = 0; i < 10; i++) await app.get('user');
  await sleep(700);
  await server.restart();
  // Failures reach onError; ioredis prints each error its client emits without a listener.
  const lines = logged.mock.calls.map((args) => args.map(String).join(' ').split('\n')[0]);
  expect(lines).toEqual([]);
  expect(app.failures.length).toBeGreaterThan(0);
  // The spy would have caught them: a client without a listener is heard in the same time.
  const control = await printedByUnheardClient(logged, 700);
  expect(control.some((line) => line.includes('Unhandled error event'))).toBe(true);
});

it('closes the client it built from redisUrl when the app closes while Redis is down', async () => {
  const server = await ownRedis();
  const app = await faultApp(express, server);
  await server.stop();
  expect((await app.get('user')).degraded).toBe('allow');
  // The positive control: a client with the same settings, left open, reconnecting as well.
  const control = createRedisClient(server.url, { connectionName: 'control' });
  await app.close();
  await server.restart();
  // A client still reconnecting would be back within its 200 ms backoff, as the control is.
  await sleep(1_200);
  const admin = new Redis(server.url);
  try {
    const clients = ((await admin.client('LIST')) as string).trim().split('\n');
    // Every connection but this one, which is running CLIENT LIST.
    const others = clients.filter((line) => !line.includes(' cmd=client|list '));
    expect(others.map((line) => /\bname=(\S*)/.exec(line)?.[1])).toEqual(['control']);
  } finally {
    admin.disconnect();
    control.disconnect();
  }
});

it('closes within a second when the app closes while Redis is paused', async () => {
  const server = await ownRedis();
  const app = await faultApp(express, server);
  server.pause();
  expect((await app.get('user')).degraded).toBe('allow');
  const closing = app.close().then(() => 'closed');
  // The harness resumes the server after the test, which lets a close still waiting end.
  closing.catch(() => {});
  expect(await Promise.race([closing, sleep(1_000, 'still closing')])).toBe('closed');
});
