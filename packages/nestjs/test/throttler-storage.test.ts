// SentinelThrottlerStorage under @nestjs/throttler's own guard and decorators, in real Nest apps on Express and Fastify sharing one Redis.
import { setTimeout as sleep } from 'node:timers/promises';
import type { INestApplication } from '@nestjs/common';
import request from 'supertest';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { connect, uniquePrefix } from '../../../test/harness/clients.ts';
import { nestApp } from '../../../test/harness/nest-apps.ts';
import { failOnError } from '../../../test/harness/store-errors.ts';
import { waitFor } from '../../../test/harness/wait-for.ts';
import type { SentinelThrottlerStorageOptions } from '../src/index.ts';

const { createThrottlerApp } = (await import(
  nestApp('throttler-app')
)) as typeof import('./apps/throttler-app.ts');

const apps: INestApplication[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

async function appOn(
  platform: 'express' | 'fastify',
  storage: SentinelThrottlerStorageOptions,
): Promise<INestApplication> {
  const app = await createThrottlerApp({ platform, storage });
  apps.push(app);
  return app;
}

describe.each(['express', 'fastify'] as const)('on %s', (platform) => {
  /** Two apps on one Redis and prefix, as two processes of one service would be. */
  async function fleet() {
    // Any Redis failure fails the test: a request admitted by the failure mode proves nothing.
    const storage = {
      redis: connect(),
      prefix: uniquePrefix('throttler-app'),
      timeout: 1_000,
      onError: failOnError,
    };
    return [
      await appOn(platform, storage),
      await appOn(platform, { ...storage, redis: connect() }),
    ];
  }

  it('holds the limit across two apps on one Redis', async () => {
    const [first, second] = await fleet();
    const statuses = [];
    for (let i = 0; i < 8; i++) {
      const app = (i % 2 === 0 ? first : second) as INestApplication;
      statuses.push((await request(app.getHttpServer()).get('/')).status);
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
    // @Throttle's own limit, on a key of its own.
    const strict = [];
    for (let i = 0; i < 3; i++) {
      const app = (i % 2 === 0 ? second : first) as INestApplication;
      strict.push((await request(app.getHttpServer()).get('/strict')).status);
    }
    expect(strict).toEqual([200, 200, 429]);
  });

  it("answers with the guard's own headers and 429 body", async () => {
    const [app] = await fleet();
    const server = (app as INestApplication).getHttpServer();
    const admitted = await request(server).get('/strict');
    expect(admitted.status).toBe(200);
    expect(admitted.headers).toMatchObject({
      'x-ratelimit-limit': '2',
      'x-ratelimit-remaining': '1',
      'x-ratelimit-reset': '60',
      'x-ratelimit-limit-long': '1000',
      'x-ratelimit-remaining-long': '999',
      'x-ratelimit-reset-long': '3600',
    });
    await request(server).get('/strict');
    const refused = await request(server).get('/strict');
    expect(refused.status).toBe(429);
    expect(refused.body).toEqual({
      statusCode: 429,
      message: 'ThrottlerException: Too Many Requests',
    });
    // Without a blockDuration the guard blocks for the ttl: until the oldest hit stops counting.
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(55);
    expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(60);
  });

  it('blocks for blockDuration, past the end of the window', async () => {
    const [app] = await fleet();
    const server = (app as INestApplication).getHttpServer();
    expect((await request(server).get('/blocking')).status).toBe(200);
    const blocked = await request(server).get('/blocking');
    expect(blocked.status).toBe(429);
    expect(blocked.headers['retry-after']).toBe('2');
    // The hit stopped counting after 500 ms; the block lasts 2 s.
    await sleep(800);
    const still = await request(server).get('/blocking');
    expect(still.status).toBe(429);
    expect(['1', '2']).toContain(still.headers['retry-after']);
    await sleep(1_500);
    expect((await request(server).get('/blocking')).status).toBe(200);
  });

  it('skips @SkipThrottle() handlers and controllers', async () => {
    const [app] = await fleet();
    const server = (app as INestApplication).getHttpServer();
    for (let i = 0; i < 8; i++) {
      const health = await request(server).get('/health');
      expect(health.status).toBe(200);
      expect(health.headers['x-ratelimit-limit']).toBeUndefined();
      expect((await request(server).get('/internal')).status).toBe(200);
    }
    // Nothing was counted: the limited route still has its whole limit.
    expect((await request(server).get('/')).headers['x-ratelimit-remaining']).toBe('4');
  });

  it('closes the client it built from redisUrl when the app closes', async () => {
    const admin = connect();
    const name = uniquePrefix('throttler_app').replaceAll('-', '_');
    const app = await createThrottlerApp({
      platform,
      storage: { redisUrl: `${inject('redisUrl')}?connectionName=${name}` },
    });
    expect((await request(app.getHttpServer()).get('/')).status).toBe(200);
    const connected = async () => String(await admin.client('LIST')).includes(`name=${name} `);
    expect(await connected()).toBe(true);
    await app.close();
    await waitFor(async () => !(await connected()), 5_000, 'the storage to close its client');
  });
});
