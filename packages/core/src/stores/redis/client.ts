// createRedisClient: an ioredis client with the settings a rate limiter wants, to one server, a
// Cluster, or the master that Redis Sentinel names.
import { createRequire } from 'node:module';
import { fail } from '../../shared/validation.ts';
import type { IoredisLikeClient } from './connection.ts';

/**
 * Settings for a limiter's connection. Nothing queues while disconnected and nothing is re-sent
 * after a reconnect: the scripts' expiry would make a late call do nothing, but it would still
 * cost Redis a call. Retries are bounded; reconnects come within 200 ms, so limiting resumes
 * soon after Redis does; keep-alive finds dead peers; a connection attempt gives up after 2 s.
 */
export const LIMITER_CLIENT_OPTIONS = {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 1,
  autoResendUnfulfilledCommands: false,
  keepAlive: 10_000,
  connectTimeout: 2_000,
  retryStrategy: (attempt: number) => Math.min(attempt * 50, 200),
} as const;

interface IoredisModule {
  Redis: new (...args: unknown[]) => unknown;
  Cluster: new (...args: unknown[]) => unknown;
}

function seeds(url: string | readonly string[]): string[] {
  const list = (typeof url === 'string' ? url.split(',') : [...url]).map((u) => u.trim());
  if (list.length === 0 || list.some((u) => !/^rediss?:\/\/./.test(u))) {
    fail('redisUrl', `must be redis:// or rediss:// URLs, got ${JSON.stringify(url)}`);
  }
  return list;
}

/** A user name (optional) and password, for a server or a sentinel. */
export interface RedisCredentials {
  readonly username?: string | undefined;
  readonly password: string;
}

/** A Redis Sentinel deployment: the master's name, and the sentinels that know where it is. */
export interface RedisSentinelTarget {
  /** The name the sentinels monitor the master under (`sentinel monitor <name> …`). */
  readonly masterName: string;
  /** The sentinels to ask; the client learns of the others from the first that answers. */
  readonly sentinels: readonly { readonly host: string; readonly port: number }[];
  /** Credentials of the sentinels themselves. */
  readonly sentinelAuth?: RedisCredentials | undefined;
  /** Credentials of the master and its replicas. */
  readonly auth?: RedisCredentials | undefined;
  /** TLS to the sentinels and to the master alike. @default false */
  readonly tls?: boolean | undefined;
}

/**
 * An ioredis `Redis` for one URL, or a `Cluster` for several (a list, or one string separated by
 * commas), with {@link LIMITER_CLIENT_OPTIONS}. `options` are ioredis options layered over them.
 * ioredis must be installed.
 * @example createRedisClient('redis://10.0.0.5:6379')
 * @example createRedisClient(['redis://10.0.0.5:7000', 'redis://10.0.0.6:7000'])
 */
export function createRedisClient(
  url: string | readonly string[],
  options: Record<string, unknown> = {},
): IoredisLikeClient {
  const nodes = seeds(url);
  const ioredis = loadIoredis('redisUrl');
  return quiet(build(ioredis, nodes, { ...LIMITER_CLIENT_OPTIONS, ...options }));
}

/**
 * An ioredis `Redis` that asks the sentinels of `target` for the master, and asks them again at
 * each reconnect, so that after a failover it reaches the promoted replica; with
 * {@link LIMITER_CLIENT_OPTIONS} and `options` layered over them. ioredis must be installed.
 * @example createRedisSentinelClient({ masterName: 'mymaster', sentinels: [{ host: '10.0.0.1', port: 26379 }] })
 */
export function createRedisSentinelClient(
  target: RedisSentinelTarget,
  options: Record<string, unknown> = {},
): IoredisLikeClient {
  const { masterName, sentinels, sentinelAuth, auth, tls = false } = target;
  if (sentinels.length === 0) fail('sentinels', 'must name at least one sentinel');
  const ioredis = loadIoredis('sentinels');
  return quiet(
    new ioredis.Redis({
      ...LIMITER_CLIENT_OPTIONS,
      ...options,
      name: masterName,
      sentinels: sentinels.map(({ host, port }) => ({ host, port })),
      sentinelUsername: sentinelAuth?.username,
      sentinelPassword: sentinelAuth?.password,
      username: auth?.username,
      password: auth?.password,
      // `tls` alone leaves the master in plain text: ioredis reads it there only with
      // enableTLSForSentinelMode. The sentinels have their own, sentinelTLS.
      ...(tls && { tls: {}, enableTLSForSentinelMode: true, sentinelTLS: {} }),
    }) as never,
  );
}

function loadIoredis(option: string): IoredisModule {
  try {
    return createRequire(import.meta.url)('ioredis');
  } catch {
    fail(option, 'needs the ioredis package: npm install ioredis');
  }
}

/**
 * Nobody else holds a client built here to listen: without a listener ioredis prints every
 * failed reconnect. Failures reach the limiter's onError through the calls that meet them.
 */
function quiet(
  client: IoredisLikeClient & { on(event: 'error', listener: () => void): unknown },
): IoredisLikeClient {
  client.on('error', () => {});
  return client;
}

function build(
  ioredis: IoredisModule,
  nodes: string[],
  settings: Record<string, unknown>,
): IoredisLikeClient & { on(event: 'error', listener: () => void): unknown } {
  if (nodes.length === 1) return new ioredis.Redis(nodes[0], settings) as never;
  const startup = nodes.map((node) => {
    const { hostname, port } = new URL(node);
    return { host: hostname, port: Number(port || 6379) };
  });
  const first = new URL(nodes[0] as string);
  // A Cluster connects to a master at its first command to it. Without its offline queue it
  // refuses commands until then and retries them 100 ms later, so it keeps the queue; the store
  // sends nothing while the Cluster as a whole is down.
  const { enableOfflineQueue: _, retryStrategy, ...redisOptions } = settings;
  return new ioredis.Cluster(startup, {
    clusterRetryStrategy: retryStrategy,
    redisOptions: {
      ...redisOptions,
      ...(first.username && { username: decodeURIComponent(first.username) }),
      ...(first.password && { password: decodeURIComponent(first.password) }),
      ...(first.protocol === 'rediss:' && { tls: {} }),
    },
  }) as never;
}
