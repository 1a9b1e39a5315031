// Every Redis client library Sentinel supports, built the way its users build it; clients close after the file.
import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster as IoCluster6, Redis as IoRedis6 } from 'ioredis';
import { Cluster as IoCluster5, Redis as IoRedis5 } from 'ioredis5';
import { Redis as Valkey, Cluster as ValkeyCluster } from 'iovalkey';
import { createClient as createClient6, createCluster as createCluster6 } from 'redis';
import { createClient as createClient5, createCluster as createCluster5 } from 'redis5';
import { afterAll } from 'vitest';
import type { RedisClient } from '../../packages/core/src/index.ts';

export const LIBRARIES = [
  'ioredis 6',
  'ioredis 5',
  'iovalkey',
  'node-redis 6',
  'node-redis 5',
] as const;
export type LibraryName = (typeof LIBRARIES)[number];
export const NODE_REDIS = ['node-redis 6', 'node-redis 5'] as const;

export interface Seed {
  readonly host: string;
  readonly port: number;
}

/** A client as the user made it, before they connected it. */
export interface Unconnected {
  readonly client: RedisClient;
  /** What the user's code does to connect: `connect()` for node-redis, nothing more for ioredis. */
  connect(): Promise<void>;
}

/** The slice of both APIs this file drives; the libraries' own types differ too much to share. */
interface Closable {
  status?: string;
  isOpen?: boolean;
  connect(): Promise<unknown>;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  once(event: string, listener: (...args: unknown[]) => void): unknown;
  disconnect?(): unknown;
  destroy?(): unknown;
}

const opened: Closable[] = [];
afterAll(async () => {
  for (const client of opened.splice(0)) {
    try {
      // node-redis destroy() and ioredis disconnect() drop the socket without waiting on Redis.
      if (client.status === undefined) {
        if (client.isOpen) client.destroy?.();
      } else client.disconnect?.();
    } catch {}
  }
  await sleep(0);
});

function track(client: unknown): Closable {
  const handle = client as Closable;
  // An 'error' event without a listener would crash the run while a server is down.
  handle.on('error', () => {});
  // node-redis clusters report each node's errors apart.
  if (handle.status === undefined) handle.on('node-error', () => {});
  opened.push(handle);
  return handle;
}

async function ioredisReady(handle: Closable): Promise<void> {
  if (handle.status === 'ready') return;
  if (handle.status === 'wait') await handle.connect();
  const deadline = Date.now() + 10_000;
  while (handle.status !== 'ready') {
    if (Date.now() > deadline) throw new Error(`client not ready in 10 s: ${handle.status}`);
    await sleep(10);
  }
}

function rootNodes(seeds: readonly Seed[]) {
  return seeds.map(({ host, port }) => ({ url: `redis://${host}:${port}` }));
}

/** A client of `library` for one server (`url`) or a cluster (`seeds`), not yet connected by the user. */
export function unconnected(library: LibraryName, target: string | readonly Seed[]): Unconnected {
  const cluster = typeof target !== 'string';
  let client: unknown;
  if (library === 'node-redis 6' || library === 'node-redis 5') {
    const v6 = library === 'node-redis 6';
    if (cluster) {
      const options = { rootNodes: rootNodes(target) };
      client = v6 ? createCluster6(options) : createCluster5(options);
    } else {
      const options = { url: target as string };
      client = v6 ? createClient6(options) : createClient5(options);
    }
  } else {
    const [Redis, Cluster] = {
      'ioredis 6': [IoRedis6, IoCluster6],
      'ioredis 5': [IoRedis5, IoCluster5],
      iovalkey: [Valkey, ValkeyCluster],
    }[library] as unknown as [
      new (url: string, options: object) => unknown,
      new (seeds: Seed[], options: object) => unknown,
    ];
    // ioredis connects by itself unless lazy; lazy shows the store starting the connection.
    client = cluster
      ? new Cluster([...target], { lazyConnect: true })
      : new Redis(target as string, { lazyConnect: true });
  }
  const handle = track(client);
  return {
    client: client as RedisClient,
    async connect() {
      if (handle.status === undefined) await handle.connect();
      else await ioredisReady(handle);
    },
  };
}

/** A connected client of `library`, with the library's default settings. */
export async function open(
  library: LibraryName,
  target: string | readonly Seed[],
): Promise<RedisClient> {
  const made = unconnected(library, target);
  await made.connect();
  return made.client;
}
