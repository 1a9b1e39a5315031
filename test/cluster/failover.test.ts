// Redis Cluster failover and a hung master under load through an Express app: no 5xx, other masters unaffected.
import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster, type ClusterOptions } from 'ioredis';
import { Cluster as Cluster5 } from 'ioredis5';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  byHeader,
  createLimiter,
  type HttpLimiterOptions,
  type SentinelError,
} from '../../packages/core/src/index.ts';
import type { RouteBody, RunningApp } from '../adapters/driver.ts';
import { driver } from '../adapters/express.ts';
import { CLIENTS, type ClientName, uniquePrefix } from '../harness/clients.ts';
import { keySlot, type RedisCluster, startCluster } from '../harness/redis-cluster.ts';
import type { RedisProcess } from '../harness/redis-server.ts';
import { waitFor } from '../harness/wait-for.ts';

/**
 * The Cluster options the README recommends: a command whose connection closed, or that met
 * CLUSTERDOWN, fails at once (Sentinel fails open) instead of being re-sent to the next master
 * up to 16 times, 100 ms apart, long after the decision was made without it.
 */
const RECOMMENDED: ClusterOptions = { retryDelayOnFailover: 0, retryDelayOnClusterDown: 0 };
const LIMIT = 5;
/** The load route's policy: the log's largest limit, never reached here, counted exactly. */
const LOAD = { limit: 10_000, window: '1h', algorithm: 'sliding-window-log' } as const;
/** How soon after the new master takes over limits must hold again. */
const RECOVERY_MS = 5_000;
/** How long a master hangs: well under the cluster's 1 s node timeout, so no replica takes over. */
const HANG_MS = 400;

let cluster: RedisCluster;
const clients: Cluster[] = [];
const apps: RunningApp[] = [];

beforeAll(async () => {
  // A 1 s node timeout: a killed master is replaced in about 2 s.
  cluster = await startCluster({ masters: 3, replicas: 1, nodeTimeoutMs: 1000 });
}, 60_000);

afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

afterAll(async () => {
  for (const client of clients) client.disconnect();
  await cluster?.stop();
});

function connectCluster(name: ClientName, options: ClusterOptions = RECOMMENDED): Cluster {
  const client =
    name === 'ioredis 6'
      ? new Cluster([...cluster.seeds], options)
      : (new Cluster5([...cluster.seeds], options as never) as unknown as Cluster);
  client.on('error', () => {});
  clients.push(client);
  return client;
}

/** Identities (for `byHeader('x-tenant')`) whose keys live in `slot`, never used before. */
function* identitiesIn(slot: number): Generator<string> {
  const label = uniquePrefix('tenant');
  for (let i = 0; i < 10_000_000; i++) {
    if (keySlot(`x-tenant:${label}-${i}`) === slot) yield `${label}-${i}`;
  }
}

/** A fresh identity whose master has a live replica to take over, and the slot it lives in. */
async function identityWithReplica() {
  for (let i = 0; i < 100; i++) {
    const identity = uniquePrefix('victim');
    const slot = keySlot(`x-tenant:${identity}`);
    const shard = await cluster.shardOf(slot);
    const replica = shard.replicas[0];
    if (replica) return { identity, slot, shard, replica };
  }
  throw new Error('no master has a live replica left');
}

/** A fresh identity (for `byHeader('x-tenant')`) whose slot a master other than `master` serves. */
async function bystanderOf(identity: string, master: RedisProcess): Promise<string> {
  for (let i = 0; ; i++) {
    const candidate = `${identity}-bystander-${i}`;
    const owner = await cluster.shardOf(keySlot(`x-tenant:${candidate}`));
    if (owner.master !== master) return candidate;
  }
}

interface Outcome {
  identity: string;
  /** performance.now() when the request was sent. */
  at: number;
  ms: number;
  status: number;
  degraded: boolean;
}

async function get(url: string, identity: string): Promise<Outcome> {
  const at = performance.now();
  const response = await fetch(url, { headers: { 'x-tenant': identity } });
  const body = (await response.json()) as Partial<RouteBody>;
  const degraded = body.rateLimit?.degraded !== undefined;
  return { identity, at, ms: performance.now() - at, status: response.status, degraded };
}

/** One sequential stream of requests per identity listed, until stopped (or for 60 s at most). */
function steadyLoad(app: RunningApp, identities: readonly string[]) {
  const outcomes: Outcome[] = [];
  let running = true;
  const deadline = performance.now() + 60_000;
  const streams = identities.map(async (identity) => {
    while (running && performance.now() < deadline) {
      outcomes.push(await get(`${app.url}/load`, identity));
      await sleep(2);
    }
  });
  return {
    outcomes,
    async stop(): Promise<Outcome[]> {
      running = false;
      await Promise.all(streams);
      return outcomes;
    },
  };
}

/**
 * Fresh identities of `slot` send LIMIT + 1 requests each until one gets exactly its limit,
 * undegraded, then a 429. Resolves with the time (performance.now()) that first happened.
 */
async function enforcedAgain(app: RunningApp, slot: number, outcomes: Outcome[]) {
  const until = performance.now() + RECOVERY_MS + 5_000;
  for (const identity of identitiesIn(slot)) {
    const probe: Outcome[] = [];
    for (let i = 0; i <= LIMIT; i++) probe.push(await get(app.url, identity));
    outcomes.push(...probe);
    const seen = probe.map((o) => (o.degraded ? 'degraded' : o.status));
    if (seen.join() === `${'200,'.repeat(LIMIT)}429`) return performance.now();
    if (performance.now() > until) break;
    await sleep(50);
  }
  throw new Error('limits were not enforced again');
}

async function startApp(redis: Cluster, options: Partial<HttpLimiterOptions> = {}) {
  const prefix = uniquePrefix('failover');
  const failures: Array<{ identity: string; code: SentinelError['code'] }> = [];
  const app = await driver.start({
    options: {
      redis,
      prefix,
      limit: LIMIT,
      window: '1h',
      identify: byHeader('x-tenant', { trusted: true }),
      onError: (error, req) => {
        const code = (error as SentinelError).code;
        failures.push({ identity: String(req.headers['x-tenant']), code });
      },
      ...options,
    },
    routes: [{ path: '/load', rateLimit: LOAD }],
  });
  apps.push(app);
  /**
   * What the load route consumed for an identity, read from the cluster after the fact with the
   * default options. A degraded peek would read as nothing consumed, so any store error throws.
   */
  async function consumed(identity: string): Promise<number> {
    const reader = createLimiter({
      redis,
      prefix,
      ...LOAD,
      onError: (error) => {
        throw error;
      },
    });
    const { remaining } = await reader.peek(`x-tenant:${identity}`);
    await reader.close();
    return LOAD.limit - remaining;
  }
  return { app, failures, consumed };
}

/** Milliseconds from `from` of the first and last degraded requests, and the slowest answer. */
function summary(outcomes: readonly Outcome[], from: number): string {
  const degraded = outcomes.filter((o) => o.degraded).map((o) => o.at - from);
  const window = degraded.length
    ? ` (sent ${Math.round(Math.min(...degraded))} to ${Math.round(Math.max(...degraded))} ms)`
    : '';
  const slowest = Math.round(Math.max(...outcomes.map((o) => o.ms)));
  return `${outcomes.length} requests, ${degraded.length} failed open${window}, slowest ${slowest} ms`;
}

describe.each(CLIENTS)('a gateway on the cluster through %s Cluster', (name) => {
  it('answers every request and enforces limits right after CLUSTER FAILOVER on a replica', async ({
    annotate,
  }) => {
    const { identity, slot, replica } = await identityWithReplica();
    const { app } = await startApp(connectCluster(name));
    const load = steadyLoad(app, [identity, identity, identity, identity]);
    await sleep(300);

    const switched = performance.now();
    await cluster.failover(replica);
    const promoted = performance.now();
    expect((await cluster.shardOf(slot)).master).toBe(replica);
    const probes: Outcome[] = [];
    const enforced = await enforcedAgain(app, slot, probes);
    await sleep(200);
    const outcomes = [...(await load.stop()), ...probes];

    expect(outcomes.filter((o) => o.status >= 500)).toEqual([]);
    expect(outcomes.filter((o) => o.identity === identity && !o.degraded).length).toBeGreaterThan(
      0,
    );
    expect(enforced - promoted).toBeLessThan(RECOVERY_MS);
    await annotate(
      `promoted ${Math.round(promoted - switched)} ms after CLUSTER FAILOVER, limits enforced ` +
        `${Math.round(enforced - promoted)} ms later; ${summary(outcomes, switched)}`,
    );
  });

  it('answers every request while a master is killed, and enforces limits within 5 s of its replica taking over', async ({
    annotate,
  }) => {
    const { identity, slot, shard, replica } = await identityWithReplica();
    const { app, failures, consumed } = await startApp(connectCluster(name));
    const load = steadyLoad(app, [identity, identity, identity, identity]);
    await sleep(300);

    const killed = performance.now();
    await cluster.kill(shard.master);
    expect(await cluster.waitForNewMaster(slot, shard.master)).toBe(replica);
    const promoted = performance.now();
    const probes: Outcome[] = [];
    const enforced = await enforcedAgain(app, slot, probes);
    await sleep(200);
    const outcomes = [...(await load.stop()), ...probes];

    expect(outcomes.filter((o) => o.status >= 500)).toEqual([]);
    expect(enforced - promoted).toBeLessThan(RECOVERY_MS);
    // Requests waved through while the master was gone consumed nothing on the new one: no
    // command was re-sent once its request had been decided without it. Only calls in flight
    // when the master died (it may have run and replicated them) or that met their deadline
    // may have counted.
    const streamed = outcomes.filter((o) => o.identity === identity);
    const counted = streamed.filter((o) => !o.degraded).length;
    const inFlight = streamed.filter((o) => o.degraded && o.at < killed && o.at + o.ms > killed);
    const late = failures.filter((f) => f.identity === identity && f.code === 'STORE_TIMEOUT');
    expect(await consumed(identity)).toBeLessThanOrEqual(counted + inFlight.length + late.length);
    await annotate(
      `replica took over ${Math.round(promoted - killed)} ms after the kill, limits enforced ` +
        `${Math.round(enforced - promoted)} ms later; ${summary(outcomes, killed)}`,
    );
  });
});

it('keeps identities on the other masters enforced while one master is killed, with the default breaker and partial coverage', async ({
  annotate,
}) => {
  // The breakers are per master: the killed master's errors open only the breaker of the
  // identities it serves. Without full coverage the other masters keep serving while a slot has
  // no master.
  await cluster.configSet('cluster-require-full-coverage', 'no');
  const { identity, slot, shard, replica } = await identityWithReplica();
  const bystander = await bystanderOf(identity, shard.master);
  const { app, failures } = await startApp(connectCluster('ioredis 6'));
  const load = steadyLoad(app, [identity, identity, identity, bystander]);
  await sleep(300);

  const killed = performance.now();
  await cluster.kill(shard.master);
  expect(await cluster.waitForNewMaster(slot, shard.master)).toBe(replica);
  const promoted = performance.now();
  const probes: Outcome[] = [];
  const enforced = await enforcedAgain(app, slot, probes);
  const outcomes = [...(await load.stop()), ...probes];

  expect(outcomes.filter((o) => o.status >= 500)).toEqual([]);
  const bystanders = outcomes.filter((o) => o.identity === bystander);
  expect(bystanders.length).toBeGreaterThan(10);
  expect(bystanders.filter((o) => o.degraded)).toEqual([]);
  expect(failures.filter((f) => f.identity === bystander)).toEqual([]);
  expect(enforced - promoted).toBeLessThan(RECOVERY_MS);
  await annotate(
    `replica took over ${Math.round(promoted - killed)} ms after the kill, limits enforced ` +
      `${Math.round(enforced - promoted)} ms later; killed master: ` +
      `${summary(
        outcomes.filter((o) => o.identity === identity),
        killed,
      )}; ` +
      `other master: ${summary(bystanders, killed)}`,
  );
});

it('detects a hung master while the others answer, failing open only the identities it serves until it resumes', async ({
  annotate,
}) => {
  // SIGSTOP keeps the master's connections open and answers nothing: only its own silence can
  // show it, while replies from the bystander's master keep arriving all along.
  const identity = uniquePrefix('hung');
  const slot = keySlot(`x-tenant:${identity}`);
  const { master } = await cluster.shardOf(slot);
  const bystander = await bystanderOf(identity, master);
  const { app, failures, consumed } = await startApp(connectCluster('ioredis 6'));
  const load = steadyLoad(app, [identity, identity, identity, bystander]);
  await sleep(300);

  cluster.pause(master);
  const pausedAt = performance.now();
  await sleep(HANG_MS);
  cluster.resume(master);
  const resumedAt = performance.now();
  // Its breaker lets a call through after the 1 s cool-down, and counting resumes.
  await waitFor(
    () => load.outcomes.some((o) => o.identity === identity && o.at > resumedAt && !o.degraded),
    10_000,
  );
  const probes: Outcome[] = [];
  await enforcedAgain(app, slot, probes);
  const outcomes = [...(await load.stop()), ...probes];

  expect(outcomes.filter((o) => o.status >= 500)).toEqual([]);
  // The bystander was counted throughout, while the hung master's breaker was open too.
  const bystanders = outcomes.filter((o) => o.identity === bystander);
  const servedWhileHung = bystanders.filter((o) => o.at > pausedAt && o.at + o.ms < resumedAt);
  expect(servedWhileHung.length).toBeGreaterThan(0);
  expect(bystanders.filter((o) => o.degraded)).toEqual([]);
  expect(failures.filter((f) => f.identity === bystander)).toEqual([]);
  // The hung master's identity failed open: nothing it was told while the master was silent
  // was counted, the calls that waited for it were reported as timed out, and its breaker then
  // answered the rest without waiting.
  const streamed = outcomes.filter((o) => o.identity === identity);
  const whileHung = streamed.filter((o) => o.at > pausedAt && o.at + o.ms < resumedAt);
  expect(whileHung.filter((o) => !o.degraded)).toEqual([]);
  const timedOut = failures.filter((f) => f.identity === identity);
  expect(timedOut.length).toBeGreaterThan(0);
  expect(new Set(failures.map((f) => f.code))).toEqual(new Set(['STORE_TIMEOUT']));
  expect(streamed.filter((o) => o.degraded).length).toBeGreaterThan(timedOut.length);
  // The calls that timed out reached the master only after their expiry, when it resumed, and
  // did nothing; a call it ran just as it froze may have counted without its reply being read.
  const counted = streamed.filter((o) => !o.degraded).length;
  const charged = await consumed(identity);
  expect(charged).toBeGreaterThanOrEqual(counted);
  expect(charged).toBeLessThanOrEqual(counted + timedOut.length);
  await annotate(
    `hung for ${Math.round(resumedAt - pausedAt)} ms; ` +
      `hung master: ${summary(streamed, pausedAt)}, ${timedOut.length} timed out, ` +
      `${charged - counted} of them charged; other master: ${summary(bystanders, pausedAt)}, ` +
      `${servedWhileHung.length} answered while it hung`,
  );
});
