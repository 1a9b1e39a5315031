// A call the store gave up on keeps no quota: Redis stopped (SIGSTOP) again and again under load
// on one key, and afterwards Redis holds exactly what was admitted without being degraded.
import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster, type Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ALGORITHMS,
  type Algorithm,
  createLimiter,
  type Decision,
  type LimiterOptions,
  type SentinelError,
  type StoreErrorMode,
} from '../packages/core/src/index.ts';
import { onRedis } from '../packages/core/test/stores.ts';
import { connect, uniquePrefix } from './harness/clients.ts';
import { holdReplies } from './harness/late-reply.ts';
import { keySlot, type RedisCluster, startCluster } from './harness/redis-cluster.ts';
import { type RedisProcess, startRedis } from './harness/redis-server.ts';
import { waitFor } from './harness/wait-for.ts';

/** Calls in flight on the key at once: enough that they go to Redis in batches. */
const IN_FLIGHT = 64;
/** Pauses per test, each on a fresh key. */
const PAUSES = 8;
/**
 * A huge limit over a long window: the load never reaches it, and what refills while a key is
 * in use (well under a unit in a few seconds) changes no count. The log keeps one entry per
 * request and allows at most 10,000.
 */
const LIMIT = 1_000_000;
const LOG_LIMIT = 10_000;
const WINDOW = '1000d';

/**
 * How long a pause lasts: often about the deadline (48 ms), so that Redis may run a call it
 * holds just before its expiry and the reply comes after the store gave up; else up to 250 ms.
 */
function pauseMs(): number {
  return Math.random() < 1 / 2 ? 40 + Math.random() * 20 : 60 + Math.random() * 190;
}

/**
 * Stops the server just after it ran the next script call: a script that keeps Redis busy for
 * 40 ms leaves right behind the call, in the same write, and the stop lands 10 to 20 ms later,
 * while Redis spins with the call's reply unwritten. Once it resumes, that reply comes after the
 * store gave up on the call. (Should Redis not have read the two by then, as on a loaded
 * machine, the call runs past its expiry on resume, and does nothing.)
 */
async function pauseBehindNextCall(client: Redis | Cluster, server: Server): Promise<void> {
  await new Promise<void>((resolve) => {
    holdReplies(client, 40, 1, { connection: server.connection, onHold: resolve }).catch(() => {});
  });
  await sleep(10 + Math.random() * 10);
  server.pause();
}

/** The server holding an identity's keys, and the client's connection to it. */
interface Server {
  pause(): void;
  resume(): void;
  readonly connection: Redis;
}

/** Where the load runs: a client, and the server holding an identity's keys. */
interface Topology {
  readonly client: Redis | Cluster;
  serverOf(identity: string): Promise<Server>;
}

/** What one pause left: the decisions made, what Redis holds, and the late refunds observed. */
interface Run {
  /** Admitted by Redis, not degraded: what Redis must hold. */
  readonly admitted: number;
  readonly degraded: number;
  /** Units Redis holds as taken, by a peek once everything has settled. */
  readonly held: number;
  readonly refunds: number;
  readonly refundErrors: number;
}

interface Case {
  readonly algorithm: Algorithm;
  /** `onStoreError`; 'allow' by default. */
  readonly mode?: StoreErrorMode;
  /** Scripts run on a test's clock (script-clock.ts), which sends every call alone. */
  readonly alone?: boolean;
}

/**
 * Runs IN_FLIGHT consumers on a fresh key, stops its server once calls flow, and
 * lets the load go on for 100 ms after it resumes; then waits for every late reply, and reads
 * what Redis holds. Default options otherwise: a 50 ms deadline and the circuit breaker.
 */
async function pauseUnderLoad(topology: Topology, test: Case, round: number): Promise<Run> {
  const { algorithm, mode, alone } = test;
  const limit = algorithm === 'sliding-window-log' ? LOG_LIMIT : LIMIT;
  const prefix = uniquePrefix('late');
  const identity = `tenant-${round}`;
  const errors: SentinelError[] = [];
  let refunds = 0;
  let refundErrors = 0;
  /** The store: with `alone`, one whose scripts run on this process's clock. */
  const storeOf = (timeout?: number) =>
    onRedis(topology.client, { clock: alone ? Date.now : undefined, ...(timeout && { timeout }) });
  const options: LimiterOptions = {
    ...storeOf(),
    prefix,
    limit,
    window: WINDOW,
    algorithm,
    onError: (error) => errors.push(error),
    observe: {
      lateRefund({ error }) {
        if (error === undefined) refunds++;
        else refundErrors++;
      },
    },
    ...(mode && { onStoreError: mode }),
  };
  const limiter = createLimiter(options);
  // Reads what Redis holds, patiently: no deadline or breaker between it and the answer.
  const checker = createLimiter({ ...options, ...storeOf(10_000), breaker: false });
  const server = await topology.serverOf(identity);
  let running = true;
  try {
    let admitted = 0;
    let degraded = 0;
    let answered = 0;
    const unexpected: Decision[] = [];
    const consumers = Array.from({ length: IN_FLIGHT }, async () => {
      while (running) {
        const decision = await limiter.consume(identity);
        if (decision.degraded !== undefined) {
          // The failure mode still decides, memory included.
          if (!decision.allowed || decision.degraded !== (mode ?? 'allow')) {
            unexpected.push(decision);
          }
          degraded++;
        } else {
          answered++;
          if (decision.allowed) admitted++;
        }
        // A breaker or memory answers at once: yield, so that timers still run.
        if (decision.degraded === undefined) await new Promise(setImmediate);
        else await sleep(1);
      }
    });
    await waitFor(() => answered >= 200, 10_000, 'calls flowing');
    // Every other pause lands just after a call ran; the others at any moment.
    if (round % 2 === 0) {
      await pauseBehindNextCall(topology.client, server);
      await sleep(60 + Math.random() * 190);
    } else {
      await sleep(Math.random() * 15);
      server.pause();
      await sleep(pauseMs());
    }
    server.resume();
    await sleep(100);
    running = false;
    await Promise.all(consumers);
    expect(unexpected).toEqual([]);
    // Every late reply comes before the answer to a command sent after it on its connection, and
    // the refunds go out a turn later: after two more round trips the refunds have run.
    for (let i = 0; i < 3; i++) {
      await topology.client.exists(`${prefix}:{${identity}}settled`);
      await sleep(20);
    }
    const peeked = await checker.peek(identity);
    expect(peeked.degraded).toBeUndefined();
    // The deadline gave up on calls; no refund failed.
    const failures = errors.filter((e) => e.code !== 'STORE_TIMEOUT' && e.code !== 'STORE_BUSY');
    expect(failures).toEqual([]);
    return { admitted, degraded, held: limit - peeked.remaining, refunds, refundErrors };
  } finally {
    running = false;
    server.resume();
    await limiter.close();
    await checker.close();
  }
}

/** Runs PAUSES pauses, and checks what each left. */
async function pausesUnderLoad(topology: Topology, test: Case): Promise<Run[]> {
  const runs: Run[] = [];
  for (let round = 0; round < PAUSES; round++) {
    runs.push(await pauseUnderLoad(topology, test, round));
  }
  const figures = runs.map((run) => `${run.admitted}/${run.held}/${run.refunds}`).join(' ');
  console.info(`${describeCase(test)}: admitted/held/refunded ${figures}`);
  // The pauses did degrade calls, and some replies came late: typically every pause that lands
  // behind a call gives back what it admitted, and now and then one of the others.
  expect(runs.some((run) => run.degraded > 0)).toBe(true);
  expect(runs.some((run) => run.refunds > 0)).toBe(true);
  // Each key holds exactly what was admitted undegraded: every consume admitted after its caller
  // was answered degraded was given back.
  expect(runs.map((run) => run.refundErrors)).toEqual(runs.map(() => 0));
  expect(runs.map((run) => run.held)).toEqual(runs.map((run) => run.admitted));
  return runs;
}

const CASES: Case[] = [
  ...ALGORITHMS.map((algorithm) => ({ algorithm })),
  ...ALGORITHMS.map((algorithm) => ({ algorithm, alone: true })),
  { algorithm: 'token-bucket', mode: 'local' },
];

function describeCase({ algorithm, mode, alone }: Case): string {
  return `${algorithm}${alone ? ', each call alone' : ', in batches'}${mode ? `, onStoreError ${mode}` : ''}`;
}

describe('on a single Redis', () => {
  let server: RedisProcess;
  let client: Redis;
  beforeAll(async () => {
    server = await startRedis();
    client = connect('ioredis 6', server.url);
    await waitFor(() => client.status === 'ready');
  });
  afterAll(async () => {
    server?.resume();
    client?.disconnect();
    await server?.stop();
  });

  it.each(CASES.map((test) => [describeCase(test), test] as const))(
    'holds only what was admitted undegraded, %s',
    async (_, test) => {
      const connection = client;
      const serverOf = async () => ({
        pause: () => server.pause(),
        resume: () => server.resume(),
        connection,
      });
      await pausesUnderLoad({ client, serverOf }, test);
    },
    60_000,
  );
});

describe('on a Redis Cluster', () => {
  let cluster: RedisCluster;
  let client: Cluster;
  beforeAll(async () => {
    cluster = await startCluster({ masters: 3 });
    client = new Cluster([...cluster.seeds]);
    client.on('error', () => {});
    await client.ping();
  }, 60_000);
  afterAll(async () => {
    client?.disconnect();
    await cluster?.stop();
  });

  it.each(CASES.map((test) => [describeCase(test), test] as const))(
    'holds only what was admitted undegraded, %s',
    async (_, test) => {
      await pausesUnderLoad(
        {
          client,
          async serverOf(identity) {
            const { master } = await cluster.shardOf(keySlot(identity));
            const connection = client
              .nodes('master')
              .find((node) => node.options.port === master.port) as Redis;
            return {
              pause: () => cluster.pause(master),
              resume: () => cluster.resume(master),
              connection,
            };
          },
        },
        test,
      );
    },
    60_000,
  );
});
