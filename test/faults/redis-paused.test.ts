// Redis paused (SIGSTOP) under HTTP load: deadlines, the breaker, recovery, and what runs late on resume.
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import type { Identifier } from '../../packages/core/src/index.ts';
import { codes, DEADLINE_MS, DRIVERS, faultApp, ownRedis, untilLimiting } from './apps.ts';
import { identities, latencies, now, percentile, sentBetween, startLoad } from './load.ts';

// Bounds as in redis-killed.test.ts. A paused Redis keeps its connections, so calls sent to it
// wait for the whole deadline: the decision bound is the deadline plus the 10 ms deadline timer
// and event loop lag; the breaker must then keep later requests from waiting at all.
const RESPONSE_BOUND_MS = DEADLINE_MS + 250;
const DECISION_BOUND_MS = DEADLINE_MS + 50;
const OPEN_P99_BOUND_MS = DEADLINE_MS / 2;

/**
 * Identities `resume-*` get 5 an hour, for the recovery check; the load's get a million a day in a
 * sliding log, so that every call Redis ran is one member of its identity's set.
 */
const tiers = {
  STRICT: { limit: 5, window: '1h' },
  BULK: { limit: 1_000_000, window: '1d', algorithm: 'sliding-window-log' },
} as const;
const identify: Identifier = (req) => {
  const user = String(req.headers['x-user']);
  return { key: user, tier: user.startsWith('resume-') ? 'STRICT' : 'BULK' };
};

/** How many calls Redis ran for each load identity: the size of its sliding log. */
async function executedByUser(url: string, prefix: string): Promise<Map<string, number>> {
  const admin = new Redis(url);
  try {
    const keys = await admin.keys(`${prefix}:*:bulk-*`);
    const counts = new Map<string, number>();
    for (const key of keys) {
      const user = /\{(.*)\}/.exec(key)?.[1] as string;
      counts.set(user, await admin.zcard(key));
    }
    return counts;
  } finally {
    admin.disconnect();
  }
}

describe.each(DRIVERS)('$name', (driver) => {
  it('answers within the deadline, keeps later requests fast, and limits again after resume', async () => {
    const server = await ownRedis();
    const app = await faultApp(driver, server, { tiers, identify });
    const users = identities('load', 50);
    const load = startLoad(app.url, {
      concurrency: 20,
      maxMs: 10_000,
      maxRequests: 100_000,
      users,
    });
    await sleep(600);
    server.pause();
    const pausedAt = now();
    await sleep(1_500);
    server.resume();
    const resumedAt = now();
    const resumedAfter = await untilLimiting(app, 5, resumedAt);
    await sleep(200);
    const samples = await load.stop();

    expect(samples.filter((s) => s.status !== 200)).toEqual([]);
    expect(percentile(samples, 100), latencies(samples)).toBeLessThan(RESPONSE_BOUND_MS);
    const paused = sentBetween(samples, pausedAt, resumedAt);
    expect(paused.length).toBeGreaterThan(200);
    expect(paused.filter((s) => s.degraded !== 'allow')).toEqual([]);
    // Calls sent to the silent Redis failed at their deadline, not before and not much after.
    expect(codes(app.failures)).toEqual(['STORE_TIMEOUT']);
    const slowest = Math.max(...app.failures.map((f) => f.ms));
    expect(slowest).toBeLessThan(DECISION_BOUND_MS);
    // The breaker opened once the first calls timed out, then answered without Redis.
    const openedAt = paused.find((s) => s.skipped)?.sentAt ?? Number.POSITIVE_INFINITY;
    expect(openedAt - pausedAt).toBeLessThan(DECISION_BOUND_MS);
    const open = sentBetween(paused, openedAt);
    expect(open.filter((s) => s.skipped).length / open.length).toBeGreaterThan(0.99);
    expect(percentile(open, 99), latencies(open)).toBeLessThan(OPEN_P99_BOUND_MS);
    expect(resumedAfter).toBeLessThan(2_000);
    const resumed = sentBetween(samples, resumedAt + resumedAfter);
    expect(resumed.length).toBeGreaterThan(0);
    expect(resumed.filter((s) => s.degraded !== undefined)).toEqual([]);

    // A frozen Redis still holds the calls already sent to it, and runs them when it resumes:
    // each identity was charged for its answered calls plus exactly its timed-out ones, and
    // never for a call the breaker answered.
    const executed = await executedByUser(server.url, app.prefix);
    for (const user of users) {
      const answered = samples.filter((s) => s.user === user && s.degraded === undefined);
      const timedOut = app.failures.filter((f) => f.user === user);
      expect({ user, executed: executed.get(user) ?? 0 }).toEqual({
        user,
        executed: answered.length + timedOut.length,
      });
    }
    // Those late calls are the few in flight when it froze, plus one probe per cool-down.
    expect(app.failures.length).toBeLessThanOrEqual(20 + 3);
  });
});
