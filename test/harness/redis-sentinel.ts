// A throw-away Redis Sentinel group: a master, one replica and one or more sentinel processes, on
// free ports, with passwords when asked.
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

/** Where a sentinel listens, as ioredis's `sentinels` option takes it. */
export interface SentinelAddress {
  readonly host: string;
  readonly port: number;
}

export interface SentinelGroup {
  /** The name the sentinels monitor the master under. */
  readonly name: string;
  readonly master: RedisProcess;
  readonly replica: RedisProcess;
  /** The first sentinel. */
  readonly sentinel: SentinelAddress;
  /** Every sentinel, the first included. */
  readonly sentinels: readonly SentinelAddress[];
  /** The master's address as the first sentinel reports it now (`SENTINEL get-master-addr-by-name`). */
  masterPort(): Promise<number>;
  stop(): Promise<void>;
}

export interface SentinelOptions {
  /** `down-after-milliseconds`: how long a silent master takes to be judged down. */
  downAfterMs?: number;
  /** `failover-timeout`. */
  failoverTimeoutMs?: number;
  /** How many sentinels to start; a majority of them is the quorum. */
  sentinels?: number;
  /**
   * `password` is the master's and the replica's (`requirepass`, and `masterauth` between them);
   * `sentinelPassword` the sentinels' own (`requirepass` in their configuration).
   */
  auth?: { readonly password: string; readonly sentinelPassword: string };
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

/** A reply of `SENTINEL REPLICAS` or `SENTINEL SENTINELS`: one field list per node, as maps. */
function nodes(reply: unknown): Map<string, string>[] {
  return (reply as string[][]).map((fields) => {
    const info = new Map<string, string>();
    for (let i = 0; i + 1 < fields.length; i += 2)
      info.set(String(fields[i]), String(fields[i + 1]));
    return info;
  });
}

/** Sets a password on a running server: `startRedis` checks a server it starts without one. */
async function requirePassword(server: RedisProcess, password: string): Promise<void> {
  const admin = new Redis({ port: server.port, host: '127.0.0.1', lazyConnect: true });
  admin.on('error', () => {});
  try {
    await admin.config('SET', 'requirepass', password);
  } finally {
    admin.disconnect();
  }
}

/**
 * Starts a master, a replica of it (`--replicaof`) and `sentinels` sentinels (`redis-server
 * <conf> --sentinel`) monitoring it with a majority quorum, and resolves once the replica is in
 * sync and every sentinel knows it and the other sentinels, so that a failover has something
 * to promote and a majority to elect its leader.
 */
export async function startSentinelGroup({
  downAfterMs = 500,
  failoverTimeoutMs = 5_000,
  sentinels: count = 1,
  auth,
}: SentinelOptions = {}): Promise<SentinelGroup> {
  const name = 'mymaster';
  const dir = await mkdtemp(join(tmpdir(), 'sentinel-ha-'));
  const masterAuth = auth === undefined ? [] : ['--masterauth', auth.password];
  // A replica saves the RDB of its first sync as dump.rdb in its dir. Left in the working
  // directory, it would be loaded by every later server started there, which would not be empty.
  // The master syncs its replica at once instead of waiting 5 s for more to share the transfer.
  const master = await startRedis(['--dir', dir, '--repl-diskless-sync-delay', '0', ...masterAuth]);
  if (auth) await requirePassword(master, auth.password);
  const replica = await startRedis([
    '--dir',
    dir,
    ...masterAuth,
    '--replicaof',
    '127.0.0.1',
    String(master.port),
  ]);
  if (auth) await requirePassword(replica, auth.password);

  const started: Array<{ child: ChildProcess; exited: Promise<unknown> }> = [];
  const admins: Redis[] = [];
  const addresses: SentinelAddress[] = [];
  const stop = async (): Promise<void> => {
    for (const admin of admins) admin.disconnect();
    await Promise.all(
      started.map(async ({ child, exited }) => {
        if (child.exitCode === null && child.signalCode === null) {
          child.kill('SIGKILL');
          await exited;
        }
      }),
    );
    await Promise.all([master.stop(), replica.stop()]);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < count; i++) {
      const port = await freePort();
      // The sentinel rewrites its config file as it learns the topology: it must be writable.
      const config = join(dir, `sentinel-${i}.conf`);
      await writeFile(
        config,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          'protected-mode no',
          `dir ${dir}`,
          `sentinel monitor ${name} 127.0.0.1 ${master.port} ${Math.floor(count / 2) + 1}`,
          `sentinel down-after-milliseconds ${name} ${downAfterMs}`,
          `sentinel failover-timeout ${name} ${failoverTimeoutMs}`,
          `sentinel parallel-syncs ${name} 1`,
          ...(auth === undefined
            ? []
            : [
                `sentinel auth-pass ${name} ${auth.password}`,
                `requirepass ${auth.sentinelPassword}`,
                // What one sentinel gives when it connects to another.
                `sentinel sentinel-pass ${auth.sentinelPassword}`,
              ]),
          '',
        ].join('\n'),
      );
      const [command, args] = diesWithThisProcess(requireRedisServer(), [config, '--sentinel']);
      const child = spawn(command, args, { stdio: 'ignore' });
      children.add(child);
      const exited = new Promise((resolve) => child.once('exit', resolve));
      void exited.then(() => children.delete(child));
      started.push({ child, exited });
      addresses.push({ host: '127.0.0.1', port });
      const admin = new Redis({
        port,
        host: '127.0.0.1',
        password: auth?.sentinelPassword,
        retryStrategy: () => 50,
        lazyConnect: true,
      });
      admin.on('error', () => {});
      admins.push(admin);
    }

    const replicaAdmin = new Redis({
      port: replica.port,
      host: '127.0.0.1',
      password: auth?.password,
      lazyConnect: true,
    });
    replicaAdmin.on('error', () => {});
    try {
      await waitUntil('the replica syncing', async () =>
        (await replicaAdmin.info('replication')).includes('master_link_status:up'),
      );
    } finally {
      replicaAdmin.disconnect();
    }
    // Sentinels find each other by their hello messages on the master, every 2 s.
    await Promise.all(
      admins.map(async (admin) => {
        await waitUntil('a sentinel knowing the replica', async () =>
          nodes(await admin.call('SENTINEL', 'REPLICAS', name)).some(
            (info) => info.get('port') === String(replica.port) && info.get('flags') === 'slave',
          ),
        );
        await waitUntil(
          `a sentinel knowing the other ${count - 1}`,
          async () => nodes(await admin.call('SENTINEL', 'SENTINELS', name)).length === count - 1,
        );
      }),
    );
  } catch (error) {
    await stop();
    throw error;
  }
  const [first] = admins as [Redis, ...Redis[]];
  return {
    name,
    master,
    replica,
    sentinel: addresses[0] as SentinelAddress,
    sentinels: addresses,
    async masterPort() {
      const [, masterPort] = (await first.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name)) as [
        string,
        string,
      ];
      return Number(masterPort);
    },
    stop,
  };
}
