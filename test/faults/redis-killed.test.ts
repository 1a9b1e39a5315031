// Redis killed (SIGKILL) under HTTP load through each adapter: fail open fast, then limit again on restart.
import { describe, expect, it } from 'vitest';
import { codes, DRIVERS, faultApp, outage, ownRedis } from './apps.ts';
import { latencies, percentile, sentBetween } from './load.ts';

// Bounds, for a 2-core machine running the app, its load and Redis at once, are ten times the
// typical figure, so that they catch a hang or a queue, not a slow machine:
// - every HTTP response within 1 s (the slowest is typically 60 to 100 ms); a client that queued
//   calls or waited on its reconnects would take longer;
// - every failed decision reported within 600 ms (typically 0 to 70 ms): a lost connection
//   fails at once, and a call already sent when Redis died fails once the deadline has passed.
const RESPONSE_BOUND_MS = 1_000;
const DECISION_BOUND_MS = 600;

describe.each(DRIVERS)('$name', (driver) => {
  it('fails open without a 5xx, fast, and limits again within 2 s of a restart', async () => {
    const server = await ownRedis();
    const app = await faultApp(driver, server);
    const { samples, stoppedAt, restartingAt, restartedAt, resumedAfter } = await outage(
      app,
      server,
      1_500,
    );

    // Never a 5xx nor a dropped request, and every response within the bound.
    expect(samples.filter((s) => s.status === 0 || s.status >= 500)).toEqual([]);
    expect(percentile(samples, 100), latencies(samples)).toBeLessThan(RESPONSE_BOUND_MS);
    // While Redis was gone, everything was admitted, degraded.
    const down = sentBetween(samples, stoppedAt, restartingAt);
    expect(down.length).toBeGreaterThan(200);
    expect(down.filter((s) => s.status !== 200 || s.degraded !== 'allow')).toEqual([]);
    // Decisions that met the dead store failed within the bound.
    expect(app.failures.length).toBeGreaterThan(0);
    expect(codes(app.failures)).toSatisfy((found: string[]) =>
      found.every((code) => code === 'STORE_UNAVAILABLE' || code === 'STORE_TIMEOUT'),
    );
    const slowest = Math.max(...app.failures.map((f) => f.ms));
    expect(slowest).toBeLessThan(DECISION_BOUND_MS);
    // The breaker opened at once and then answered nearly everything without Redis, fast.
    const openedAt = down.find((s) => s.skipped)?.sentAt ?? Number.POSITIVE_INFINITY;
    expect(openedAt - stoppedAt).toBeLessThan(DECISION_BOUND_MS);
    const open = sentBetween(down, openedAt);
    expect(open.filter((s) => s.skipped).length / open.length).toBeGreaterThan(0.99);
    // Limiting came back within 2 s for the app as it was, and for all of its traffic.
    expect(resumedAfter).toBeLessThan(2_000);
    const resumed = sentBetween(samples, restartedAt + resumedAfter);
    expect(resumed.length).toBeGreaterThan(0);
    expect(resumed.filter((s) => s.degraded !== undefined)).toEqual([]);
  });
});
