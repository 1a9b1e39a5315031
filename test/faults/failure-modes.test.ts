// Fail-closed and local modes with Redis killed under HTTP load, each back to normal after a restart.
import { describe, expect, it } from 'vitest';
import { driver as express } from '../adapters/express.ts';
import { driver as fastify } from '../adapters/fastify.ts';
import { uniquePrefix } from '../harness/clients.ts';
import { DRIVERS, faultApp, outage, ownRedis, untilLimiting, waitFor } from './apps.ts';
import { latencies, now, percentile, sentBetween, statuses } from './load.ts';

// As in redis-killed.test.ts: ten times the slowest response typically seen.
const RESPONSE_BOUND_MS = 1_000;

describe.each(DRIVERS)("$name with onStoreError 'deny'", (driver) => {
  it('answers 503 problems while Redis is down, and limits again within 2 s of a restart', async () => {
    const server = await ownRedis();
    const app = await faultApp(driver, server, { onStoreError: 'deny' });
    const { samples, stoppedAt, restartingAt, restartedAt, resumedAfter } = await outage(
      app,
      server,
      1_000,
    );

    expect(samples.filter((s) => ![200, 429, 503].includes(s.status))).toEqual([]);
    expect(percentile(samples, 100), latencies(samples)).toBeLessThan(RESPONSE_BOUND_MS);
    const down = sentBetween(samples, stoppedAt, restartingAt);
    expect(down.length).toBeGreaterThan(200);
    expect(down.filter((s) => s.status !== 503)).toEqual([]);
    const contentTypes = new Set(down.map((s) => s.contentType.split(';')[0]));
    expect([...contentTypes]).toEqual(['application/problem+json']);
    for (const { body } of down) {
      expect(body).toEqual({
        type: 'about:blank',
        title: 'Service Unavailable',
        status: 503,
        detail: expect.any(String),
      });
    }
    expect(resumedAfter).toBeLessThan(2_000);
    const resumed = sentBetween(samples, restartedAt + resumedAfter);
    expect(resumed.length).toBeGreaterThan(0);
    expect(resumed.filter((s) => s.status !== 200 && s.status !== 429)).toEqual([]);
    expect(resumed.filter((s) => s.degraded !== undefined)).toEqual([]);
  });
});

describe("onStoreError 'local'", () => {
  it('enforces the limit per instance while Redis is down: 5 of each instance’s 20', async () => {
    const server = await ownRedis();
    // One prefix: the instances count in one budget while Redis is up.
    const options = {
      onStoreError: 'local',
      limit: 5,
      prefix: uniquePrefix('faults-local'),
    } as const;
    const apps = [
      await faultApp(express, server, options),
      await faultApp(fastify, server, options),
    ];
    // While Redis is up, the two instances share one budget.
    const shared = [];
    for (let i = 0; i < 4; i++) for (const app of apps) shared.push(await app.get('shared'));
    expect(shared.filter((s) => s.status === 200 && s.degraded === undefined)).toHaveLength(5);
    expect(shared.filter((s) => s.status === 429)).toHaveLength(3);

    await server.stop();
    for (const app of apps)
      await waitFor(async () => (await app.get('probe')).degraded === 'local');
    const bursts = await Promise.all(
      apps.map((app) => Promise.all(Array.from({ length: 20 }, () => app.get('user')))),
    );
    for (const burst of bursts) {
      expect(burst.every((s) => s.status === 429 || s.degraded === 'local')).toBe(true);
      expect(statuses(burst)).toEqual({ 200: 5, 429: 15 });
    }

    await server.restart();
    const restartedAt = now();
    for (const app of apps) expect(await untilLimiting(app, 5, restartedAt)).toBeLessThan(2_000);
  });
});
