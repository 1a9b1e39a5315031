// Races 2000 requests for one tenant across four Nest processes, two on Express and two on Fastify, on one Redis: exactly the limit.
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  answeringAtOnce,
  awayFromWindowEdge,
  type Fleet,
  freshTenant,
  get,
  type RaceResult,
  race,
} from '../../examples/race-demo/fleet.ts';
import { ALGORITHMS } from '../../packages/core/src/index.ts';
import { connect, uniquePrefix } from '../harness/clients.ts';
import { type NestFleetMode, startNestFleet } from '../harness/nest-fleet.ts';

const PLATFORMS = ['express', 'express', 'fastify', 'fastify'] as const;
const REQUESTS = 2000;
const LIMIT = 100;
const HOUR_MS = 3_600_000;
// Eight Nest processes, started at once beside the other suites' load, then warmed up.
const START_MS = 120_000;

/** Four gateways of one mode on the run's Redis. */
function nestFleet(mode: NestFleetMode): Promise<Fleet> {
  const redisUrl = inject('redisUrl');
  const prefix = uniquePrefix(`nest-${mode}`);
  return startNestFleet(PLATFORMS.map((platform) => ({ platform, mode, redisUrl, prefix })));
}

/**
 * Sends each route a race of its own for a tenant of its own, refusals included, before the races
 * that count. Freshly started, a Nest process takes long enough over its first burst of 500
 * requests (compiling its code, and Redis its scripts) that decisions can miss the limiter's
 * 50 ms deadline and be decided by `onStoreError`: the counted races measure the fleet, not its
 * start.
 */
async function warmUp(fleet: Fleet, paths: readonly string[]): Promise<void> {
  for (const path of paths) await race(fleet.gateways, path, freshTenant('warm-up'), 4 * LIMIT);
}

/** The statuses, and the 200s a store-error mode admitted in place of Redis. */
function outcome(result: RaceResult) {
  return { statuses: result.statuses, degraded: result.degraded };
}

describe('four Nest processes with SentinelGuard, two on Express and two on Fastify', () => {
  let fleet: Fleet | undefined;
  beforeAll(async () => {
    fleet = await nestFleet('sentinel');
    await warmUp(
      fleet,
      ALGORITHMS.map((algorithm) => `/${algorithm}`),
    );
  }, START_MS);
  afterAll(async () => {
    await fleet?.stop();
  });

  it.each(ALGORITHMS)(
    'admits exactly 100 of 2000 concurrent requests spread over them with %s',
    async (algorithm) => {
      // An hourly fixed window that rolled over mid-race would rightly admit a second 100.
      if (algorithm === 'fixed-window') await awayFromWindowEdge(connect(), HOUR_MS);
      const gateways = (fleet as Fleet).gateways;
      const result = await race(gateways, `/${algorithm}`, freshTenant(algorithm), REQUESTS);
      // Every admission came from Redis's script, none from `onStoreError` after a missed deadline.
      expect(outcome(result), JSON.stringify(result)).toEqual({
        statuses: { 200: LIMIT, 429: REQUESTS - LIMIT },
        degraded: 0,
      });
      // Several processes were deciding at once; which of them admitted the 100 is the
      // scheduler's choice.
      expect(answeringAtOnce(result), JSON.stringify(result)).toBeGreaterThan(1);
    },
  );
});

/** Redis failures the fleet's storages have answered by their failure mode, so far. */
async function storeErrors(fleet: Fleet): Promise<number> {
  const replies = await Promise.all(
    fleet.gateways.map((gateway) => get(`${gateway.url}/store-errors`)),
  );
  return replies.reduce((sum, { body }) => sum + (body as { storeErrors: number }).storeErrors, 0);
}

/** A race of the throttled route, with the store errors it met: none, when Redis decided all. */
async function throttlerRace(fleet: Fleet, tenant: string) {
  const before = await storeErrors(fleet);
  const result = await race(fleet.gateways, '/throttled', tenant, REQUESTS);
  return { ...result, storeErrors: (await storeErrors(fleet)) - before };
}

describe('four Nest processes with @nestjs/throttler, two on Express and two on Fastify', () => {
  let sentinelStorage: Fleet | undefined;
  let nestLabStorage: Fleet | undefined;
  beforeAll(async () => {
    [sentinelStorage, nestLabStorage] = await Promise.all([
      nestFleet('throttler-sentinel'),
      nestFleet('throttler-nestlab'),
    ]);
    await warmUp(sentinelStorage, ['/throttled']);
    await warmUp(nestLabStorage, ['/throttled']);
  }, START_MS);
  afterAll(async () => {
    await Promise.all([sentinelStorage?.stop(), nestLabStorage?.stop()]);
  });

  it('admits exactly 100 of 2000 concurrent requests with SentinelThrottlerStorage, beside @nest-lab/throttler-storage-redis', async ({
    annotate,
  }) => {
    const sentinel = await throttlerRace(sentinelStorage as Fleet, freshTenant('throttler'));
    const nestLab = await throttlerRace(nestLabStorage as Fleet, freshTenant('nest-lab'));
    // For the docs' comparison: what the other Redis storage admitted under the same race.
    await annotate(
      `@nest-lab/throttler-storage-redis admitted ${nestLab.admitted} of ${REQUESTS} at a limit ` +
        `of ${LIMIT} (by gateway: ${nestLab.admittedBy.join(', ')}); SentinelThrottlerStorage ` +
        `${sentinel.admitted} (by gateway: ${sentinel.admittedBy.join(', ')})`,
    );

    // Every answer came from Redis's script, none from `onStoreError` after a missed deadline.
    expect(
      { statuses: sentinel.statuses, storeErrors: sentinel.storeErrors },
      JSON.stringify(sentinel),
    ).toEqual({ statuses: { 200: LIMIT, 429: REQUESTS - LIMIT }, storeErrors: 0 });
    expect(answeringAtOnce(sentinel), JSON.stringify(sentinel)).toBeGreaterThan(1);
    // Reported, not held to the limit: only that it answered every request, admitting at least
    // the limit (it never refuses before its count passes it).
    expect(nestLab.admitted + (nestLab.statuses[429] ?? 0), JSON.stringify(nestLab)).toBe(REQUESTS);
    expect(nestLab.admitted).toBeGreaterThanOrEqual(LIMIT);
  });
});
