// Concurrency across processes: four gateways of mixed adapters on one Redis never run more than
// `concurrency` requests of one identity at once, nor under `shed` more than the fleet's normal
// share of all requests, and a process killed holding slots holds them only until their lease ends.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createLimiter } from '../../packages/core/src/index.ts';
import { connect, uniquePrefix } from '../harness/clients.ts';
import { besideCpuHog } from '../harness/cpu-hog.ts';
import { startRedis } from '../harness/redis-server.ts';
import { waitFor } from '../harness/wait-for.ts';
import {
  ADAPTERS,
  type Fleet,
  get,
  handlerCounts,
  type Reply,
  race,
  resetHandlerCounts,
  type Server,
  type ServerSpec,
  startFleet,
} from './concurrency-fleet.ts';

const SERVERS = 4;
const CONCURRENCY = 5;
const REQUESTS = 200;
/** Every request comes from 127.0.0.1: one identity under the default `byIp()`. */
const IDENTITY = 'ip:127.0.0.1';
/** The killed process's lease, and how long after the kill the others must admit again. */
const LEASE_MS = 2_000;
const ADMITTED_WITHIN_MS = 20_000;

/**
 * The specs' processes, started before a describe's tests and stopped after them, and a client
 * of the Redis they share.
 */
function useFleet(specs: ServerSpec[], redisUrl: string): { fleet(): Fleet; redis(): Redis } {
  let fleet: Fleet | undefined;
  let redis: Redis | undefined;
  beforeAll(async () => {
    redis = connect('ioredis 6', redisUrl);
    fleet = await startFleet(specs);
  });
  afterAll(async () => {
    await fleet?.stop();
  });
  return { fleet: () => fleet as Fleet, redis: () => redis as Redis };
}

/** One process per adapter, then the first again: express, koa, fastify, express. */
function fleetSpecs(redisUrl: string, label: string, lease?: string): ServerSpec[] {
  const prefix = uniquePrefix(label);
  return Array.from({ length: SERVERS }, (_, i) => ({
    adapter: ADAPTERS[i % ADAPTERS.length] as (typeof ADAPTERS)[number],
    redisUrl,
    prefix,
    counters: `${prefix}:handlers`,
    concurrency: CONCURRENCY,
    ...(lease !== undefined && { lease }),
  }));
}

/**
 * The identity's free slots, as a peek with the fleet's policy reads them on its Redis. A store
 * error throws rather than reading as a free slot, and the deadline is generous: it is a probe.
 */
function slotsOf(redis: Redis, spec: ServerSpec) {
  const reader = createLimiter({
    redis,
    prefix: spec.prefix,
    concurrency: CONCURRENCY,
    ...(spec.lease !== undefined && { lease: spec.lease as '2s' }),
    timeout: 5_000,
    onError: (error) => {
      throw error;
    },
  });
  return {
    async free(): Promise<number> {
      const [policy] = (await reader.peek(IDENTITY)).policies;
      if (policy === undefined) throw new Error('the peek shows no policy');
      return policy.remaining;
    },
    close: () => reader.close(),
  };
}

/**
 * REQUESTS concurrent GETs of /slow (300 ms) over the fleet: never more than CONCURRENCY
 * handlers at once, none admitted without Redis, the rest refused for concurrency; then every
 * slot comes back, and requests one after another are all admitted. Returns what the race saw.
 */
async function raceForSlots(fleet: Fleet, redis: Redis) {
  const spec = (fleet.servers[0] as Server).spec;
  const slots = slotsOf(redis, spec);
  try {
    await resetHandlerCounts(redis, spec.counters);
    expect(await slots.free()).toBe(CONCURRENCY);

    const started = performance.now();
    const result = await race(fleet.servers, '/slow', REQUESTS);
    const ms = Math.round(performance.now() - started);
    const counts = await handlerCounts(redis, spec.counters);

    const { 200: admitted = 0, 429: refused = 0, ...others } = result.statuses;
    expect(others).toEqual({});
    expect(admitted + refused).toBe(REQUESTS);
    // Each admission came from Redis's script, none from `onStoreError` after a missed deadline,
    // which would hold no slot.
    expect(result.degraded).toBe(0);
    // The heart of it: across the four processes, never more than CONCURRENCY handlers at once.
    expect(counts.most).toBeLessThanOrEqual(CONCURRENCY);
    expect(admitted).toBeGreaterThanOrEqual(CONCURRENCY);
    // Every handler that ran was a request admitted, and each has finished.
    expect(counts.entered).toBe(admitted);
    expect(counts.running).toBe(0);
    const refusal = result.replies.find((reply) => reply.status === 429);
    expect(refusal?.body).toMatchObject({ status: 429, reason: 'concurrency' });
    // Every process got 50 and refused some (request i went to process i mod SERVERS): none
    // admitted by a count of its own; those that admitted none refused for slots held elsewhere.
    const refusedBy = fleet.servers.map(
      (_, index) =>
        result.replies.filter((reply, i) => i % SERVERS === index && reply.status === 429).length,
    );
    expect(refusedBy.every((count) => count > 0)).toBe(true);

    // No slot leaked: all come back as the responses close (the lease is a minute, far longer)...
    await waitFor(
      async () => (await slots.free()) === CONCURRENCY,
      10_000,
      'every slot to come back',
    );
    // ...and requests one after another, round-robin over the processes, are all admitted.
    const sequential: number[] = [];
    for (let i = 0; i < 20; i++) {
      sequential.push((await get(`${(fleet.servers[i % SERVERS] as Server).url}/`)).status);
    }
    expect(sequential).toEqual(Array(20).fill(200));
    return { admitted, most: counts.most, admittedBy: result.admittedBy, ms };
  } finally {
    await slots.close();
  }
}

function described(run: Awaited<ReturnType<typeof raceForSlots>>): string {
  return (
    `${run.admitted} of ${REQUESTS} admitted (by process: ${run.admittedBy.join(', ')}), ` +
    `at most ${run.most} at once, race ${run.ms} ms`
  );
}

describe('four gateway processes (express, koa, fastify, express) on one Redis, concurrency: 5', () => {
  const redisUrl = inject('redisUrl');
  const specs = fleetSpecs(redisUrl, 'concurrency-fleet');
  const running = useFleet(specs, redisUrl);

  it('never runs more than 5 of 200 concurrent requests for one identity at once, refuses the rest with 429, and leaks no slot', async ({
    annotate,
  }) => {
    const run = await raceForSlots(running.fleet(), running.redis());
    await annotate(described(run));
  });
});

describe('four new gateway processes on a new Redis, beside a CPU hog', () => {
  it('never run more than 5 of 200 concurrent requests for one identity at once, none admitted without Redis', async ({
    annotate,
  }) => {
    const run = await besideCpuHog(async () => {
      const server = await startRedis();
      const fleet = await startFleet(fleetSpecs(server.url, 'concurrency-hog')).catch(
        async (error: unknown) => {
          await server.stop();
          throw error;
        },
      );
      const redis = connect('ioredis 6', server.url);
      try {
        return await raceForSlots(fleet, redis);
      } finally {
        redis.disconnect();
        await fleet.stop();
        await server.stop();
      }
    });
    await annotate(described(run));
  }, 90_000);
});

describe('four gateway processes on one Redis with shed: { concurrency: 10 } beside concurrency: 1000', () => {
  const redisUrl = inject('redisUrl');
  const prefix = uniquePrefix('shed-fleet');
  const specs = Array.from({ length: SERVERS }, (_, i) => ({
    adapter: ADAPTERS[i % ADAPTERS.length] as (typeof ADAPTERS)[number],
    redisUrl,
    prefix,
    counters: `${prefix}:handlers`,
    concurrency: 1_000,
    shed: 10,
  }));
  const running = useFleet(specs, redisUrl);

  /** A race of REQUESTS over the fleet, asserted; what it saw, for the annotation. */
  async function shedRace(): Promise<string> {
    const { servers } = running.fleet();
    const redis = running.redis();
    // The fleet's count, as its documented keys hold it: the prefix with `:shed`, one identity.
    const fleet = createLimiter({
      redis,
      prefix: `${prefix}:shed`,
      policies: { name: 'fleet', concurrency: 10 },
      timeout: 5_000,
    });
    const free = async () => (await fleet.peek('fleet')).remaining;
    try {
      await resetHandlerCounts(redis, `${prefix}:handlers`);
      const started = performance.now();
      const result = await race(servers, '/slow', REQUESTS);
      const ms = Math.round(performance.now() - started);
      const counts = await handlerCounts(redis, `${prefix}:handlers`);
      const { 200: admitted = 0, 503: shed = 0, ...others } = result.statuses;
      expect(others).toEqual({});
      expect(result.degraded).toBe(0);
      // (1 - 0.2) × 10: the normal share, across the four processes.
      expect(counts.most).toBeLessThanOrEqual(8);
      expect(admitted).toBeGreaterThanOrEqual(8);
      expect(counts.entered).toBe(admitted);
      expect(admitted + shed).toBe(REQUESTS);
      const refusal = result.replies.find((reply) => reply.status === 503);
      expect(refusal?.body).toMatchObject({ status: 503, reason: 'shed' });
      // Every slot of the fleet's comes back with its response.
      await waitFor(async () => (await free()) === 10, 10_000, "the fleet's slots to come back");
      return `${admitted} of ${REQUESTS} admitted, at most ${counts.most} at once, race ${ms} ms`;
    } finally {
      await fleet.close();
    }
  }

  it('never runs more than 8 of 200 concurrent requests at once across them, sheds the rest with 503, and leaks no slot', async ({
    annotate,
  }) => {
    await annotate(await shedRace());
  });

  it('holds the same beside a CPU hog', async ({ annotate }) => {
    await annotate(await besideCpuHog(shedRace));
  });
});

describe('four gateway processes with concurrency: 5 and lease: 2s, one of them killed with SIGKILL holding all 5 slots', () => {
  const redisUrl = inject('redisUrl');
  const specs = fleetSpecs(redisUrl, 'concurrency-kill', '2s');
  const spec = specs[0] as ServerSpec;
  const running = useFleet(specs, redisUrl);

  it('refuses in the other processes until the leases end, about 2 s after, then admits 5 at once again', async ({
    annotate,
  }) => {
    const [victim, ...others] = running.fleet().servers as [Server, ...Server[]];
    const redis = running.redis();
    const slots = slotsOf(redis, spec);
    try {
      await resetHandlerCounts(redis, spec.counters);
      expect(await slots.free()).toBe(CONCURRENCY);

      // Five requests that run for a minute take every slot, all in one process.
      const holdSent = Date.now();
      const holds = Array.from({ length: CONCURRENCY }, () =>
        get(`${victim.url}/hold`).catch((error: unknown) => error),
      );
      await waitFor(
        async () => (await handlerCounts(redis, spec.counters)).running === CONCURRENCY,
        10_000,
        'five requests to hold every slot',
      );
      const heldAt = Date.now();
      expect(await slots.free()).toBe(0);

      await victim.kill('SIGKILL');
      const killedAt = Date.now();
      // None of them was answered: their process died holding their slots, releasing nothing.
      for (const hold of await Promise.all(holds)) expect(hold).toBeInstanceOf(Error);

      // Probes to the other processes, one after another, until one is admitted.
      const probes: Reply[] = [];
      for (let i = 0; Date.now() - killedAt < ADMITTED_WITHIN_MS; i++) {
        const probe = await get(`${(others[i % others.length] as Server).url}/`);
        probes.push(probe);
        if (probe.status !== 429) break;
        await sleep(20);
      }
      const first = probes.at(-1) as Reply;
      const refusals = probes.slice(0, -1);

      // Refused right after the kill, and until the first admission; nothing but 429 meanwhile.
      expect(probes[0]?.status).toBe(429);
      expect(first.status).toBe(200);
      expect(refusals.every((probe) => probe.status === 429)).toBe(true);
      // The refusal says when the leases end at the latest: within the 2 s lease.
      const retryAfter = Number(probes[0]?.headers['retry-after']);
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(LEASE_MS / 1000);
      // The slots were held by their leases, not freed at the kill: still refused at least
      // 1.5 s after they were taken (they were taken before heldAt), and admitted no sooner
      // than 1.5 s after they were asked for (at holdSent).
      const lastRefusal = refusals.at(-1) as Reply;
      expect(lastRefusal.sentAt - heldAt).toBeGreaterThanOrEqual(1_500);
      expect(first.answeredAt - holdSent).toBeGreaterThanOrEqual(1_500);
      // Admitted within 20 s of the kill (the lease is 2 s).
      expect(first.answeredAt - killedAt).toBeLessThan(ADMITTED_WITHIN_MS);

      // Every slot came back, not only one: all five free, then five run at once again.
      await waitFor(
        async () => (await slots.free()) === CONCURRENCY,
        10_000,
        'every slot to come back',
      );
      await resetHandlerCounts(redis, spec.counters);
      const after = await race(others, '/slow', 20);
      const counts = await handlerCounts(redis, spec.counters);
      expect(after.degraded).toBe(0);
      expect(after.admitted).toBeGreaterThanOrEqual(CONCURRENCY);
      expect(after.admitted + (after.statuses[429] ?? 0)).toBe(20);
      expect(counts.most).toBe(CONCURRENCY);

      await annotate(
        `slots held ${heldAt - holdSent} ms after asked for; killed ${killedAt - heldAt} ms ` +
          `later; ${refusals.length} refusals, the last sent ${lastRefusal.sentAt - heldAt} ms ` +
          `after the slots were held; first admission answered ${first.answeredAt - holdSent} ms ` +
          `after they were asked for (Retry-After ${retryAfter})`,
      );
    } finally {
      await slots.close();
    }
  });
});
