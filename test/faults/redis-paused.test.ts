// Redis paused (SIGSTOP) under HTTP load: deadlines, the breaker, recovery, and nothing counted late on resume.
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import type { Identifier } from '../../packages/core/src/index.ts';
import { EPOCH_MS } from '../../packages/core/src/shared/lua-constants.generated.ts';
import type { RedisProcess } from '../harness/redis-server.ts';
import { codes, DRIVERS, type FaultApp, faultApp, ownRedis, untilLimiting } from './apps.ts';
import { identities, latencies, now, percentile, sentBetween, startLoad } from './load.ts';

// Bounds as in redis-killed.test.ts: ten times the typical figure, so that they catch a hang,
// not a slow machine. A call sent to the paused Redis fails once the deadline has passed in
// time this process spent waiting for it, typically 50 to 70 ms after it was made.
const RESPONSE_BOUND_MS = 1_000;
const DECISION_BOUND_MS = 600;

/**
 * Identities `resume-*` get 5 an hour, for the recovery check; the load's get 10,000 a day, the
 * most a sliding log holds, so that every call Redis ran is one member of its identity's set.
 */
const tiers = {
  STRICT: { limit: 5, window: '1h' },
  BULK: { limit: 10_000, window: '1d', algorithm: 'sliding-window-log' },
} as const;
const identify: Identifier = (req) => {
  const user = String(req.headers['x-user']);
  return { key: user, tier: user.startsWith('resume-') ? 'STRICT' : 'BULK' };
};

/**
 * When Redis ran each call it counted for each load identity, in Unix ms by its clock: the times
 * its sliding log holds.
 */
async function runTimesByUser(url: string, prefix: string): Promise<Map<string, number[]>> {
  const admin = new Redis(url);
  try {
    const keys = await admin.keys(`${prefix}:*:bulk-*`);
    const times = new Map<string, number[]>();
    for (const key of keys) {
      const user = /\{(.*)\}/.exec(key)?.[1] as string;
      const entries = await admin.zrange(key, '0', '-1', 'WITHSCORES');
      const scores = entries.filter((_, i) => i % 2 === 1);
      times.set(
        user,
        scores.map((score) => Number(score) + EPOCH_MS),
      );
    }
    return times;
  } finally {
    admin.disconnect();
  }
}

/** Load on 50 identities; Redis paused for `pauseMs`, then resumed; the app until it limits again. */
async function pausedUnderLoad(app: FaultApp, server: RedisProcess, pauseMs: number) {
  const users = identities('load', 50);
  const load = startLoad(app.url, { concurrency: 20, maxMs: 10_000, maxRequests: 100_000, users });
  await sleep(600);
  server.pause();
  const pausedAt = now();
  await sleep(pauseMs);
  server.resume();
  const resumedAt = now();
  const resumedAfter = await untilLimiting(app, 5, resumedAt);
  await sleep(200);
  const samples = await load.stop();
  return { users, samples, pausedAt, resumedAt, resumedAfter };
}

/**
 * A frozen Redis still holds the calls already sent to it, and runs them when it resumes. Those
 * answered as degraded must do nothing then. So from just after the freeze until the first
 * request counted after it, no log gained an entry, and each identity's log holds its counted
 * requests plus at most its timed-out ones: a call Redis ran at the instant it froze counts,
 * though its reply waited with Redis.
 */
async function expectNothingCountedLate(
  app: FaultApp,
  server: RedisProcess,
  run: Awaited<ReturnType<typeof pausedUnderLoad>>,
) {
  const { users, samples, pausedAt } = run;
  const firstCounted = Math.min(
    ...samples.filter((s) => s.sentAt > pausedAt && s.degraded === undefined).map((s) => s.sentAt),
  );
  // The breaker, open for its 1 s cool-down, counts nothing until after the resume: the window
  // below covers the moment Redis ran the calls it held.
  expect(firstCounted - 10).toBeGreaterThan(run.resumedAt);
  const runTimes = await runTimesByUser(server.url, app.prefix);
  // The clocks of this process, of its load thread and of Redis agree to a few ms on one
  // machine: 10 ms of margin on each side keeps the calls run as Redis froze, and the first
  // counted request, out of the window. A call run late would land at the resume.
  const late = [...runTimes.values()]
    .flat()
    .filter((at) => at > pausedAt + 10 && at < firstCounted - 10);
  const since = (at: number) => Math.round(at - pausedAt);
  expect(
    late.map(since),
    `entries, in ms after the pause; it resumed at ${since(run.resumedAt)}, and the first ` +
      `request counted after it was sent at ${since(firstCounted)}`,
  ).toEqual([]);
  let ranAsItFroze = 0;
  for (const user of users) {
    const counted = samples.filter((s) => s.user === user && s.degraded === undefined).length;
    const timedOut = app.failures.filter((f) => f.user === user).length;
    const stored = runTimes.get(user)?.length ?? 0;
    expect(stored, user).toBeGreaterThanOrEqual(counted);
    expect(stored, user).toBeLessThanOrEqual(counted + timedOut);
    ranAsItFroze += stored - counted;
  }
  return ranAsItFroze;
}

describe.each(DRIVERS)('$name', (driver) => {
  it('answers within the deadline, keeps later requests off Redis, and limits again after resume', async ({
    annotate,
  }) => {
    const server = await ownRedis();
    const app = await faultApp(driver, server, { tiers, identify });
    const run = await pausedUnderLoad(app, server, 1_500);
    const { samples, pausedAt, resumedAt, resumedAfter } = run;

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
    expect(resumedAfter).toBeLessThan(2_000);
    const resumed = sentBetween(samples, resumedAt + resumedAfter);
    expect(resumed.length).toBeGreaterThan(0);
    expect(resumed.filter((s) => s.degraded !== undefined)).toEqual([]);
    const ranAsItFroze = await expectNothingCountedLate(app, server, run);
    // The calls that timed out are the few in flight when it froze, plus one probe per cool-down.
    expect(app.failures.length).toBeLessThanOrEqual(20 + 3);
    await annotate(
      `slowest failed decision ${slowest.toFixed(1)} ms after it was made; breaker open ` +
        `${(openedAt - pausedAt).toFixed(1)} ms after the pause; ${latencies(open)} while open; ` +
        `${app.failures.length} timed out, ${ranAsItFroze} of them run as Redis froze`,
    );
  });

  it('counts nothing late after a 200 ms pause under load', async ({ annotate }) => {
    const server = await ownRedis();
    const app = await faultApp(driver, server, { tiers, identify });
    const run = await pausedUnderLoad(app, server, 200);
    const { samples, pausedAt, resumedAt } = run;

    expect(samples.filter((s) => s.status !== 200)).toEqual([]);
    // Calls were in flight when Redis froze, and were answered as degraded before it resumed.
    expect(codes(app.failures)).toEqual(['STORE_TIMEOUT']);
    expect(sentBetween(samples, pausedAt, resumedAt).some((s) => s.degraded === 'allow')).toBe(
      true,
    );
    const ranAsItFroze = await expectNothingCountedLate(app, server, run);
    await annotate(`${app.failures.length} timed out, ${ranAsItFroze} of them run as Redis froze`);
  });
});
