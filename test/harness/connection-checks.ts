// Checks the connection suites repeat for every client library: counts, command statistics, an adapter's answers.

import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { expect } from 'vitest';
import {
  ALGORITHMS,
  byHeader,
  createLimiter,
  type Decision,
  type Limiter,
  type PolicyOptions,
  type RedisClient,
} from '../../packages/core/src/index.ts';
import { library } from '../../packages/core/src/stores/redis/scripts.generated.ts';
import { driver } from '../adapters/express.ts';
import { uniquePrefix } from './clients.ts';
import { freePort } from './redis-server.ts';
import { failOnError } from './store-errors.ts';
import { waitFor } from './wait-for.ts';

/** Counts are what these suites measure: any store error fails the test, rather than degrading. */
export const STEADY = { onError: failOnError };

/**
 * The positive control of a quiet console: what an ioredis client with no 'error' listener
 * prints while it reconnects for `ms` to a port where nothing listens. `printed` is the spy on
 * console.error that the quiet check reads; returns the lines it caught meanwhile.
 */
export async function printedByUnheardClient(
  printed: { mock: { calls: unknown[][] } },
  ms: number,
): Promise<string[]> {
  const before = printed.mock.calls.length;
  const client = new Redis(await freePort(), '127.0.0.1', {
    retryStrategy: (attempt) => Math.min(attempt * 50, 200),
  });
  await sleep(ms);
  client.disconnect();
  return printed.mock.calls.slice(before).map((args) => args.map(String).join(' '));
}

/** Whether each of `tries` calls, made one after another, was admitted. */
export async function admittedOf(
  consume: () => Promise<Decision>,
  tries: number,
): Promise<boolean[]> {
  const allowed: boolean[] = [];
  for (let i = 0; i < tries; i++) allowed.push((await consume()).allowed);
  return allowed;
}

/** Calls of `command` since the last CONFIG RESETSTAT, summed over `servers` (INFO commandstats). */
export async function commandCalls(servers: readonly Redis[], command: string): Promise<number> {
  const pattern = new RegExp(`cmdstat_${command}:calls=(\\d+)`);
  const stats = await Promise.all(servers.map((server) => server.info('commandstats')));
  return stats.reduce((sum, text) => sum + Number(text.match(pattern)?.[1] ?? 0), 0);
}

/**
 * Calls since the last CONFIG RESETSTAT that ran Sentinel's code, however sent: FCALL of its
 * function library, EVALSHA or EVAL of a script.
 */
export async function scriptCalls(servers: readonly Redis[]): Promise<number> {
  let sum = 0;
  for (const command of ['fcall', 'evalsha', 'eval']) sum += await commandCalls(servers, command);
  return sum;
}

/** Reads scriptCalls and resets the counts: each read gives the calls since the one before. */
export function scriptCallsSinceLastLook(servers: readonly Redis[]): () => Promise<number> {
  return async () => {
    const count = await scriptCalls(servers);
    await Promise.all(servers.map((server) => server.config('RESETSTAT')));
    return count;
  };
}

/**
 * A limiter on `client` runs by FCALL once its function library is on every server, and a call
 * that finds neither the library nor the script (FUNCTION FLUSH and SCRIPT FLUSH on every node)
 * is sent again until it runs, counted once; the library is then loaded again. `admins` are
 * plain connections to every server.
 */
export async function expectFlushRecovery(client: RedisClient, admins: readonly Redis[]) {
  const limiter = createLimiter({
    ...STEADY,
    redis: client,
    prefix: uniquePrefix('flush'),
    limit: 5,
    window: '1d',
  });
  const loaded = async () => {
    for (const admin of admins) {
      const found = await admin.call('FUNCTION', 'LIST', 'LIBRARYNAME', library.name);
      if ((found as unknown[]).length === 0) return false;
    }
    return true;
  };
  const resetStats = () => Promise.all(admins.map((admin) => admin.config('RESETSTAT')));
  // The first call tries FCALL; where a server lacks the library, it runs as a script and the
  // library is loaded on every server.
  expect((await limiter.consume('tenant')).remaining).toBe(4);
  await waitFor(loaded, 5_000, 'the function library on every server');
  await resetStats();
  expect((await limiter.consume('tenant')).remaining).toBe(3);
  expect([await commandCalls(admins, 'fcall'), await scriptCalls(admins)]).toEqual([1, 1]);

  await Promise.all(admins.map((admin) => admin.call('FUNCTION', 'FLUSH')));
  await Promise.all(admins.map((admin) => admin.script('FLUSH')));
  await resetStats();
  const decision = await limiter.consume('tenant');
  expect(decision).toMatchObject({ allowed: true, remaining: 2 });
  expect(decision.degraded).toBeUndefined();
  // FCALL found no function and EVALSHA no script, so neither ran: EVAL ran the call, once.
  expect({
    fcall: await commandCalls(admins, 'fcall'),
    evalsha: await commandCalls(admins, 'evalsha'),
    eval: await commandCalls(admins, 'eval'),
  }).toEqual({ fcall: 1, evalsha: 1, eval: 1 });
  await waitFor(loaded, 5_000, 'the function library loaded again on every server');
  await resetStats();
  expect((await limiter.consume('tenant')).remaining).toBe(1);
  expect(await commandCalls(admins, 'fcall')).toBe(1);
  await limiter.close();
}

/**
 * Serves an Express app limited at 3 a day through `client`, passed as the adapter's `redis`
 * option, and sends it four requests for one tenant: the statuses, and whether any decision the
 * route saw was degraded.
 */
export async function expressAnswers(
  client: RedisClient,
  prefix: string,
): Promise<{ statuses: number[]; degraded: unknown[] }> {
  const app = await driver.start({
    options: {
      redis: client,
      prefix,
      limit: 3,
      window: '1d',
      identify: byHeader('x-tenant-id', { trusted: true }),
    },
  });
  try {
    const statuses: number[] = [];
    const degraded: unknown[] = [];
    for (let i = 0; i < 4; i++) {
      const response = await fetch(`${app.url}/`, { headers: { 'x-tenant-id': 'tenant' } });
      statuses.push(response.status);
      const body = (await response.json()) as { rateLimit?: Decision | null };
      if (body.rateLimit?.degraded !== undefined) degraded.push(body.rateLimit.degraded);
    }
    return { statuses, degraded };
  } finally {
    await app.close();
  }
}

/**
 * Every algorithm admits exactly its limit of 3 and resets, and a tier mixing all five (limits
 * 3 to 7, one hash tag) consumes from all or from none. Day-long windows on the Redis clock: a
 * fixed window rolls over only at midnight UTC.
 */
export async function expectEveryAlgorithmAndMixedTier(client: RedisClient, label: string) {
  for (const algorithm of ALGORITHMS) {
    const single = createLimiter({
      ...STEADY,
      redis: client,
      prefix: uniquePrefix(label),
      limit: 3,
      window: '1d',
      algorithm,
    });
    const consume = () => single.consume('tenant');
    expect(await admittedOf(consume, 4), algorithm).toEqual([true, true, true, false]);
    await single.reset('tenant');
    expect((await single.peek('tenant')).remaining, algorithm).toBe(3);
    await single.close();
  }
  const mixed: PolicyOptions[] = ALGORITHMS.map((algorithm, i) => ({
    name: algorithm,
    limit: 3 + i,
    window: '1d',
    algorithm,
  }));
  const tiered = createLimiter({
    ...STEADY,
    redis: client,
    prefix: uniquePrefix(label),
    tiers: { FREE: { limit: 1, window: '1d' }, MIXED: mixed },
  });
  const consumeMixed = () => tiered.consume('tenant', { tier: 'MIXED' });
  // All or nothing: the tightest policy (3) decides, and a refusal consumes from none.
  expect(await admittedOf(consumeMixed, 5)).toEqual([true, true, true, false, false]);
  const after = await tiered.peek('tenant', { tier: 'MIXED' });
  expect(after.policies.map((p) => p.remaining)).toEqual([0, 1, 2, 3, 4]);
  await tiered.reset('tenant');
  const fresh = await tiered.peek('tenant', { tier: 'MIXED' });
  expect(fresh.policies.map((p) => p.remaining)).toEqual([3, 4, 5, 6, 7]);
  await tiered.close();
}

/**
 * Quota leases on `clients`: three limiters on one hot key of 200 an hour, a mixed tier of all
 * five algorithms, take leases (some decisions are answered without Redis), admit no more than
 * the limit, and once closed have given back what they held: the budget is spent to the unit.
 */
export async function expectQuotaLeasesExact(clients: readonly RedisClient[], label: string) {
  const prefix = uniquePrefix(label);
  const policies: PolicyOptions[] = ALGORITHMS.map((algorithm) => ({
    name: algorithm,
    limit: 200,
    window: '1h',
    algorithm,
  }));
  let local = 0;
  // A deadline of 1 s, as the conformance suites give theirs: these run beside the other suites,
  // where a reply now and then waits past the default 50 ms for a core, and a decision answered
  // by the failure mode would count an admission Redis never made.
  const timeout = 1_000;
  const fleet = clients.map((redis) =>
    createLimiter({
      ...STEADY,
      redis,
      timeout,
      prefix,
      policies,
      quotaLeases: { hotAt: 4 },
      observe: {
        decision({ storeMs }) {
          if (storeMs === undefined) local++;
        },
      },
    }),
  );
  let admitted = 0;
  for (let wave = 0; wave < 12; wave++) {
    const calls = Array.from({ length: 30 }, (_, i) =>
      (fleet[i % fleet.length] as Limiter).consume('hot'),
    );
    for (const decision of await Promise.all(calls)) if (decision.allowed) admitted++;
    expect(admitted).toBeLessThanOrEqual(200);
  }
  expect(local).toBeGreaterThan(0);
  await Promise.all(fleet.map((limiter) => limiter.close()));
  const plain = createLimiter({
    ...STEADY,
    redis: clients[0] as RedisClient,
    timeout,
    prefix,
    policies,
  });
  const rest = await Promise.all(Array.from({ length: 250 }, () => plain.consume('hot')));
  // The token bucket and GCRA refill 200 an hour: one more may have come back meanwhile.
  const total = admitted + rest.filter((d) => d.allowed).length;
  expect(total).toBeGreaterThanOrEqual(200);
  expect(total).toBeLessThanOrEqual(201);
  await plain.close();
}
