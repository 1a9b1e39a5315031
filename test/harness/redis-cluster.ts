// Builds a real Redis Cluster from throw-away redis-server processes on free ports.
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { type RedisProcess, startRedis } from './redis-server.ts';

const run = promisify(execFile);

export interface RedisCluster {
  readonly nodes: readonly RedisProcess[];
  /** host/port pairs to seed a cluster client with. */
  readonly seeds: ReadonlyArray<{ host: string; port: number }>;
  stop(): Promise<void>;
}

/** Starts `masters × (1 + replicas)` nodes and joins them with `redis-cli --cluster create`. */
export async function startCluster({ masters = 3, replicas = 0 } = {}): Promise<RedisCluster> {
  const dir = await mkdtemp(join(tmpdir(), 'sentinel-cluster-'));
  const nodes = await Promise.all(
    Array.from({ length: masters * (1 + replicas) }, (_, i) =>
      startRedis([
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        join(dir, `nodes-${i}.conf`),
        '--cluster-node-timeout',
        '2000',
      ]),
    ),
  );
  const addresses = nodes.map((node) => `127.0.0.1:${node.port}`);
  await run('redis-cli', [
    '--cluster',
    'create',
    ...addresses,
    '--cluster-replicas',
    String(replicas),
    '--cluster-yes',
  ]);
  // The cluster is usable once every node agrees that all slots are served.
  const started = Date.now();
  for (const node of nodes) {
    const client = new Redis(node.port, '127.0.0.1');
    try {
      while (!(await client.cluster('INFO')).includes('cluster_state:ok')) {
        if (Date.now() - started > 20_000) throw new Error('the cluster did not become ready');
        await sleep(50);
      }
    } finally {
      client.disconnect();
    }
  }
  return {
    nodes,
    seeds: nodes.map((node) => ({ host: '127.0.0.1', port: node.port })),
    async stop() {
      await Promise.all(nodes.map((node) => node.stop()));
      await rm(dir, { recursive: true, force: true });
    },
  };
}
