// Gateway processes whose clocks are skewed by ±30 s: Redis TIME holds the limit, each process's own clock does not.
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  ADAPTERS,
  awayFromWindowEdge,
  type Fleet,
  freshTenant,
  get,
  race,
  redisTimeMs,
  startGateways,
} from '../../examples/race-demo/fleet.ts';
import { connect, uniquePrefix } from '../harness/clients.ts';

/** Process clock offsets, slowest first: the waves below go through the gateways in this order. */
const SKEWS_MS = [-30_000, 0, 30_000, 30_000];
const LIMIT = 100;
const WINDOW_MS = 60_000;
/** Requests per wave: more than a full bucket, so every wave drains what its gateway sees. */
const WAVE = 150;

describe('four gateways with clocks skewed by -30 s, 0, +30 s and +30 s', () => {
  const prefix = uniquePrefix('skew');
  const redis = connect();
  let fleet: Fleet | undefined;

  beforeAll(async () => {
    // Mixed adapters: they share budgets as gateways of one deployment would.
    fleet = await startGateways(
      SKEWS_MS.map((skewMs, i) => ({
        adapter: ADAPTERS[i % ADAPTERS.length] as (typeof ADAPTERS)[number],
        redisUrl: inject('redisUrl'),
        prefix,
        skewMs,
        limit: LIMIT,
        window: '1m',
      })),
    );
  });
  afterAll(async () => {
    await fleet?.stop();
  });

  /**
   * One concurrent wave of WAVE requests per gateway, slowest clock first. A limiter that trusts
   * each process's clock then sees time jump 30 s forward between waves: a new fixed window, or
   * 30 s of refill. Returns the 200s, the statuses, and the Redis-clock span of the run.
   */
  async function waves(path: string) {
    const tenant = freshTenant('skew');
    const statuses: Record<number, number> = {};
    const started = await redisTimeMs(redis);
    for (const gateway of (fleet as Fleet).gateways) {
      const wave = await race([gateway], path, tenant, WAVE);
      for (const [status, count] of Object.entries(wave.statuses)) {
        statuses[Number(status)] = (statuses[Number(status)] ?? 0) + count;
      }
    }
    const ended = await redisTimeMs(redis);
    return { admitted: statuses[200] ?? 0, statuses, started, ended };
  }

  it('runs each gateway on its own skewed clock', async () => {
    for (const gateway of (fleet as Fleet).gateways) {
      const before = Date.now();
      const { body } = await get(`${gateway.url}/clock`);
      const after = Date.now();
      const real = (body as { now: number }).now - (gateway.spec.skewMs ?? 0);
      expect(real).toBeGreaterThanOrEqual(before);
      expect(real).toBeLessThanOrEqual(after);
    }
  });

  it('admits exactly 100 in a 1-minute fixed window on the Redis clock', async () => {
    await awayFromWindowEdge(redis, WINDOW_MS);
    const run = await waves('/fixed-window');
    // The run stayed within one window by the Redis clock, so 100 is the whole allowance.
    expect(Math.floor(run.ended / WINDOW_MS)).toBe(Math.floor(run.started / WINDOW_MS));
    expect(run.statuses).toEqual({ 200: LIMIT, 429: SKEWS_MS.length * WAVE - LIMIT });
  });

  it('admits 100 and only what real time refilled from a 100-per-minute token bucket on the Redis clock', async () => {
    const run = await waves('/token-bucket');
    const refilled = Math.floor(((run.ended - run.started) * LIMIT) / WINDOW_MS);
    expect(run.admitted).toBeGreaterThanOrEqual(LIMIT);
    expect(run.admitted).toBeLessThanOrEqual(LIMIT + refilled);
    expect(run.admitted + (run.statuses[429] ?? 0)).toBe(SKEWS_MS.length * WAVE);
  });

  // The comparison that shows the skew would show: atomic scripts that take each gateway's
  // skewed clock, as the original design's did (examples/race-demo/gateway-clock-limiter.ts).
  describe('comparison: atomic limiters on each process clock', () => {
    it('admits at least twice the limit in a 1-minute fixed window', async () => {
      // The -30 s and +30 s clocks are always one window apart: the later one starts afresh.
      const run = await waves('/gateway-clock/fixed-window');
      expect(run.admitted).toBeGreaterThanOrEqual(2 * LIMIT);
    });

    it('admits at least twice the limit from a 100-per-minute token bucket', async () => {
      // Each step from -30 s to 0 and from 0 to +30 s looks like 30 s of refill: 50 tokens.
      const run = await waves('/gateway-clock/token-bucket');
      expect(run.admitted).toBeGreaterThanOrEqual(2 * LIMIT);
    });
  });
});
