// A throw-away Redis Sentinel group: a master, one replica and one sentinel process, on free ports.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import {
  diesWithThisProcess,
  freePort,
  type RedisProcess,
  requireRedisServer,
  startRedis,
} from './redis-server.ts';

export interface SentinelGroup {
  /** The name the sentinel monitors the master under. */
  readonly name: string;
  readonly master: RedisProcess;
  readonly replica: RedisProcess;
  /** Where the sentinel listens, as ioredis's `sentinels` option takes it. */
  readonly sentinel: { readonly host: string; readonly port: number };
  /** The master's address as the sentinel reports it now (`SENTINEL get-master-addr-by-name`). */
  masterPort(): Promise<number>;
  stop(): Promise<void>;
}

export interface SentinelOptions {
  /** `down-after-milliseconds`: how long a silent master takes to be judged down. */
  downAfterMs?: number;
  /** `failover-timeout`. */
  failoverTimeoutMs?: number;
}

// Sentinels must not outlive the test process, whatever way it ends.
const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

async function waitUntil(what: string, condition: () => Promise<boolean>, ms = 15_000) {
  const deadline = Date.now() + ms;
  while (!(await condition().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${ms} ms`);
    await sleep(25);
  }
}

/**
 * Starts a master, a replica of it (`--replicaof`) and a sentinel (`redis-server <conf>
 * --sentinel`) monitoring it with quorum 1, and resolves once the replica is in sync and the
 * sentinel knows it, so that a failover has something to promote.
 */
export async function startSentinelGroup({
  downAfterMs = 500,
  failoverTimeoutMs = 5_000,
}: SentinelOptions = {}): Promise<SentinelGroup> {
  const name = 'mymaster';
  const dir = await mkdtemp(join(tmpdir(), 'sentinel-ha-'));
  // A replica saves the RDB of its first sync as dump.rdb in its dir. Left in the working
  // directory, it would be loaded by every later server started there, which would not be empty.
  // The master syncs its replica at once instead of waiting 5 s for more to share the transfer.
  const master = await startRedis(['--dir', dir, '--repl-diskless-sync-delay', '0']);
  const replica = await startRedis(['--dir', dir, '--replicaof', '127.0.0.1', String(master.port)]);
  const port = await freePort();
  // The sentinel rewrites its config file as it learns the topology: it must be writable.
  const config = join(dir, 'sentinel.conf');
  await writeFile(
    config,
    [
      `port ${port}`,
      'bind 127.0.0.1',
      'protected-mode no',
      `dir ${dir}`,
      `sentinel monitor ${name} 127.0.0.1 ${master.port} 1`,
      `sentinel down-after-milliseconds ${name} ${downAfterMs}`,
      `sentinel failover-timeout ${name} ${failoverTimeoutMs}`,
      `sentinel parallel-syncs ${name} 1`,
      '',
    ].join('\n'),
  );
  const [command, args] = diesWithThisProcess(requireRedisServer(), [config, '--sentinel']);
  const child = spawn(command, args, { stdio: 'ignore' });
  children.add(child);
  const exited = new Promise((resolve) => child.once('exit', resolve));
  void exited.then(() => children.delete(child));
  const admin = new Redis({ port, host: '127.0.0.1', retryStrategy: () => 50, lazyConnect: true });
  admin.on('error', () => {});

  const stop = async (): Promise<void> => {
    admin.disconnect();
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
    await Promise.all([master.stop(), replica.stop()]);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const replicaAdmin = new Redis({ port: replica.port, host: '127.0.0.1', lazyConnect: true });
    replicaAdmin.on('error', () => {});
    try {
      await waitUntil('the replica syncing', async () =>
        (await replicaAdmin.info('replication')).includes('master_link_status:up'),
      );
    } finally {
      replicaAdmin.disconnect();
    }
    await waitUntil('the sentinel knowing the replica', async () => {
      const replicas = (await admin.call('SENTINEL', 'REPLICAS', name)) as string[][];
      return replicas.some((fields) => {
        const info = new Map<string, string>();
        for (let i = 0; i + 1 < fields.length; i += 2)
          info.set(String(fields[i]), String(fields[i + 1]));
        return info.get('port') === String(replica.port) && info.get('flags') === 'slave';
      });
    });
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    name,
    master,
    replica,
    sentinel: { host: '127.0.0.1', port },
    async masterPort() {
      const [, masterPort] = (await admin.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name)) as [
        string,
        string,
      ];
      return Number(masterPort);
    },
    stop,
  };
}
