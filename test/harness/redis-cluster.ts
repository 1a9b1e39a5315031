// Builds a real Redis Cluster from throw-away redis-server processes on free ports, and fails it over.
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Cluster, Redis } from 'ioredis';
import { Cluster as Cluster5 } from 'ioredis5';
import type { ClientName } from './clients.ts';
import { freePort, type RedisProcess, startRedis } from './redis-server.ts';
import { waitForValue } from './wait-for.ts';

const run = promisify(execFile);

/**
 * The hash slot of a key, computed as ioredis routes it: with its own `cluster-key-slot`, which
 * only resolves from ioredis's location. `RedisCluster.keySlots` asks the cluster instead.
 */
export const keySlot = createRequire(createRequire(import.meta.url).resolve('ioredis'))(
  'cluster-key-slot',
) as (key: string) => number;

/** One node as `CLUSTER NODES` describes it. */
export interface ClusterNodeView {
  readonly id: string;
  readonly port: number;
  readonly role: 'master' | 'replica';
  /** The node's master, for a replica. */
  readonly masterId: string | undefined;
  /** Flagged `fail` or `fail?` by the node that was asked. */
  readonly failing: boolean;
  /** Inclusive slot ranges it serves. */
  readonly slots: ReadonlyArray<readonly [number, number]>;
}

export interface Shard {
  readonly master: RedisProcess;
  readonly replicas: readonly RedisProcess[];
}

export interface RedisCluster {
  /** Every process started, killed ones included. */
  readonly nodes: readonly RedisProcess[];
  /** host/port pairs to seed a cluster client with. */
  readonly seeds: ReadonlyArray<{ host: string; port: number }>;
  /** The hash slot of each key, as the cluster computes it (`CLUSTER KEYSLOT`). */
  keySlots(keys: readonly string[]): Promise<number[]>;
  /** The topology as a live node sees it. */
  topology(): Promise<ClusterNodeView[]>;
  /** The process serving `slot` as master, and its replicas. */
  shardOf(slot: number): Promise<Shard>;
  /**
   * `CLUSTER FAILOVER` on a replica: resolves once every live node agrees it is the master of
   * its former master's slots.
   */
  failover(replica: RedisProcess, timeoutMs?: number): Promise<void>;
  /** SIGKILLs a node; it stays down. */
  kill(node: RedisProcess): Promise<void>;
  /** SIGSTOPs a node: it keeps its connections but answers nothing, until `resume`. */
  pause(node: RedisProcess): void;
  resume(node: RedisProcess): void;
  /**
   * Waits until every live node agrees that a live master other than `former` serves `slot`
   * and the cluster is ok; resolves with that master.
   */
  waitForNewMaster(slot: number, former: RedisProcess, timeoutMs?: number): Promise<RedisProcess>;
  /** `CONFIG SET` on every live node, such as `cluster-require-full-coverage no`. */
  configSet(parameter: string, value: string): Promise<void>;
  stop(): Promise<void>;
}

export interface ClusterOptions {
  masters?: number;
  /** Replicas per master. */
  replicas?: number;
  /** `cluster-node-timeout`: how long a silent master takes to be failed over. */
  nodeTimeoutMs?: number;
}

/** Parses `CLUSTER NODES`: `<id> <ip:port@cport> <flags> <master> <ping> <pong> <epoch> <link> <slot>...`. */
function parseNodes(text: string): ClusterNodeView[] {
  return text
    .trim()
    .split('\n')
    .map((line) => {
      const [id = '', address = '', flagList = '', master = '-', , , , , ...slotFields] = line
        .trim()
        .split(' ');
      const flags = flagList.split(',');
      const port = Number(address.split('@')[0]?.split(':')[1]);
      const slots = slotFields
        .filter((field) => !field.startsWith('['))
        .map((field) => {
          const [start, end = start] = field.split('-').map(Number);
          return [start as number, end as number] as const;
        });
      return {
        id,
        port,
        role: flags.includes('master') ? 'master' : 'replica',
        masterId: master === '-' ? undefined : master,
        failing: flags.includes('fail') || flags.includes('fail?'),
        slots,
      };
    });
}

function owner(view: readonly ClusterNodeView[], slot: number): ClusterNodeView | undefined {
  return view.find(
    (node) =>
      node.role === 'master' && node.slots.some(([start, end]) => start <= slot && slot <= end),
  );
}

/**
 * Starts a cluster node. Its bus port is a free port of its own: the default, port + 10000,
 * does not exist for ports above 55535, which the OS hands out too.
 */
async function startNode(dir: string, index: number, nodeArgs: readonly string[]) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startRedis([
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        join(dir, `nodes-${index}-${attempt}.conf`),
        '--cluster-port',
        String(await freePort()),
        ...nodeArgs,
      ]);
    } catch (error) {
      if (attempt === 3) throw error;
    }
  }
}

/** Starts `masters × (1 + replicas)` nodes and joins them with `redis-cli --cluster create`. */
export async function startCluster(options: ClusterOptions = {}): Promise<RedisCluster> {
  // redis-cli refuses a node that is not empty: should a stray client reach one first, start afresh.
  for (let attempt = 1; ; attempt++) {
    try {
      return await buildCluster(options);
    } catch (error) {
      if (attempt === 2) throw error;
    }
  }
}

async function buildCluster({
  masters = 3,
  replicas = 0,
  nodeTimeoutMs = 2000,
}: ClusterOptions): Promise<RedisCluster> {
  const dir = await mkdtemp(join(tmpdir(), 'sentinel-cluster-'));
  // Replicas sync at once instead of waiting 5 s for more replicas to share a transfer.
  const nodeArgs = [
    '--cluster-node-timeout',
    String(nodeTimeoutMs),
    '--repl-diskless-sync-delay',
    '0',
  ];
  const started = await Promise.allSettled(
    Array.from({ length: masters * (1 + replicas) }, (_, i) => startNode(dir, i, nodeArgs)),
  );
  const nodes = started.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
  const admins = new Map<RedisProcess, Redis>();
  async function discard(): Promise<void> {
    for (const node of nodes) node.resume();
    for (const client of admins.values()) client.disconnect();
    await Promise.all(nodes.map((node) => node.stop()));
    await rm(dir, { recursive: true, force: true });
  }
  const failed = started.find((result) => result.status === 'rejected');
  if (failed) {
    await discard();
    throw failed.reason;
  }
  const alive = new Set(nodes);
  // One admin connection per node, never retried: a killed node's calls fail at once.
  for (const node of nodes) {
    const client = new Redis({ port: node.port, host: '127.0.0.1', retryStrategy: () => null });
    client.on('error', () => {});
    admins.set(node, client);
  }
  const admin = (node: RedisProcess): Redis => admins.get(node) as Redis;
  const byPort = (port: number): RedisProcess | undefined =>
    nodes.find((node) => node.port === port);
  const anyLive = (): RedisProcess => {
    const node = [...alive][0];
    if (!node) throw new Error('every node of the cluster is down');
    return node;
  };
  const viewOf = async (node: RedisProcess) =>
    parseNodes(String(await admin(node).cluster('NODES')));
  const isOk = async (node: RedisProcess) =>
    String(await admin(node).cluster('INFO')).includes('cluster_state:ok');

  try {
    await run('redis-cli', [
      '--cluster',
      'create',
      ...nodes.map((node) => `127.0.0.1:${node.port}`),
      '--cluster-replicas',
      String(replicas),
      '--cluster-yes',
    ]).catch((error: Error & { stdout?: string }) => {
      // redis-cli reports on stdout; its last line says what went wrong.
      const reason = error.stdout?.trim().split('\n').at(-1) ?? error.message;
      throw new Error(`redis-cli --cluster create failed: ${reason}`);
    });
    // Usable once every node serves all slots, knows every other node, and replicas are synced:
    // a failover before the first sync would have nothing to promote.
    await waitForValue(
      async () => {
        for (const node of nodes) {
          if (!(await isOk(node))) return false;
          const view = await viewOf(node);
          const replicated = view.filter((n) => n.role === 'replica').length === masters * replicas;
          if (view.length !== nodes.length || !replicated || view.some((n) => n.failing))
            return false;
          const replication = await admin(node).info('replication');
          if (replication.includes('role:slave') && !replication.includes('master_link_status:up'))
            return false;
        }
        return true;
      },
      30_000,
      'the cluster becoming ready',
    );
  } catch (error) {
    await discard();
    throw error;
  }

  /** Every live node is ok and names the same live master, not `former`, for `slot`. */
  async function agreedMaster(slot: number, former?: RedisProcess): Promise<RedisProcess | null> {
    let agreed: RedisProcess | undefined;
    for (const node of alive) {
      if (!(await isOk(node))) return null;
      const served = owner(await viewOf(node), slot);
      const process = served && !served.failing ? byPort(served.port) : undefined;
      if (!process || !alive.has(process) || process === former) return null;
      if (agreed && agreed !== process) return null;
      agreed = process;
    }
    return agreed ?? null;
  }

  const cluster: RedisCluster = {
    nodes,
    seeds: nodes.map((node) => ({ host: '127.0.0.1', port: node.port })),
    async keySlots(keys) {
      const pipeline = admin(anyLive()).pipeline();
      for (const key of keys) pipeline.cluster('KEYSLOT', key);
      const replies = (await pipeline.exec()) ?? [];
      return replies.map(([error, slot]) => {
        if (error) throw error;
        return Number(slot);
      });
    },
    topology: async () => viewOf(anyLive()),
    async shardOf(slot) {
      const view = await viewOf(anyLive());
      const master = owner(view, slot);
      const process = master && byPort(master.port);
      if (!master || !process) throw new Error(`no master serves slot ${slot}`);
      const replicas = view
        .filter((node) => node.masterId === master.id)
        .map((node) => byPort(node.port))
        .filter((node): node is RedisProcess => node !== undefined && alive.has(node));
      return { master: process, replicas };
    },
    async failover(replica, timeoutMs = 15_000) {
      const view = await viewOf(replica);
      const me = view.find((node) => node.port === replica.port);
      const master = view.find((node) => node.id === me?.masterId);
      const slot = master?.slots[0]?.[0];
      const former = master && byPort(master.port);
      if (slot === undefined || !former) throw new Error(`port ${replica.port} is no replica`);
      await admin(replica).cluster('FAILOVER');
      await waitForValue(
        async () => (await agreedMaster(slot, former)) === replica,
        timeoutMs,
        'the manual failover',
      );
    },
    async kill(node) {
      alive.delete(node);
      admin(node).disconnect();
      await node.stop();
    },
    pause(node) {
      alive.delete(node);
      node.pause();
    },
    resume(node) {
      node.resume();
      alive.add(node);
    },
    waitForNewMaster: (slot, former, timeoutMs = 20_000) =>
      waitForValue(() => agreedMaster(slot, former), timeoutMs, `a new master for slot ${slot}`),
    async configSet(parameter, value) {
      await Promise.all([...alive].map((node) => admin(node).config('SET', parameter, value)));
    },
    stop: discard,
  };
  return cluster;
}

/**
 * A Cluster client of the named ioredis major on `cluster`, with its default options, and a
 * listener for 'error' so that a node going away is not an unhandled event. The caller closes it.
 */
export function clusterClient(cluster: RedisCluster, name: ClientName = 'ioredis 6'): Cluster {
  const client =
    name === 'ioredis 6'
      ? new Cluster([...cluster.seeds])
      : (new Cluster5([...cluster.seeds]) as unknown as Cluster);
  client.on('error', () => {});
  return client;
}
