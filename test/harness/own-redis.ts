// Redis servers, clients and limiters a failure test owns, torn down after each test.
import type { Redis, RedisOptions } from 'ioredis';
import { afterEach, onTestFinished } from 'vitest';
import {
  createLimiter,
  type Limiter,
  type LimiterOptions,
  type SentinelError,
} from '../../packages/core/src/index.ts';
import { onRedis } from '../../packages/core/test/stores.ts';
import { connect, uniquePrefix } from './clients.ts';
import { type RedisProcess, startRedis } from './redis-server.ts';
import { waitFor } from './wait-for.ts';

/** The client settings the README recommends for a limiter's Redis client. */
export const RECOMMENDED: RedisOptions = {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 1,
  autoResendUnfulfilledCommands: false,
};

export const CLIENT_SETTINGS: Record<string, RedisOptions> = {
  'default client settings': {},
  'the recommended client settings': RECOMMENDED,
};

const servers: RedisProcess[] = [];
const clients: Redis[] = [];
const limiters: Limiter[] = [];

afterEach(async () => {
  // Resume first: a stopped server could not be killed cleanly, nor its clients closed.
  for (const server of servers) server.resume();
  await Promise.all(limiters.splice(0).map((limiter) => limiter.close()));
  // Disconnect before the harness quits them: a quit queued on a dead server would never settle.
  for (const client of clients.splice(0)) client.disconnect();
  await Promise.all(servers.splice(0).map((server) => server.stop()));
});

/** A server of the test's own, to stop, pause or flush without reaching other suites. */
export async function ownServer(
  port?: number,
  extraArgs: readonly string[] = [],
): Promise<RedisProcess> {
  const server = await startRedis(extraArgs, port);
  servers.push(server);
  return server;
}

export function clientOf(url: string, options: RedisOptions = {}): Redis {
  const client = connect('ioredis 6', url, options);
  clients.push(client);
  return client;
}

/**
 * The URL of a user on `server`, named `user` (also its password), whom ACLs allow every command
 * but those `denied` (ACL rules such as '-fcall'). Made through `admin`.
 */
export async function userUrl(
  admin: Redis,
  server: RedisProcess,
  user: string,
  denied: readonly string[],
): Promise<string> {
  await admin.acl('SETUSER', user, 'on', `>${user}`, '~*', '+@all', ...denied);
  return server.url.replace('redis://', `redis://${user}:${user}@`);
}

/**
 * The URL of a user on `server` whom ACLs deny Redis functions (FUNCTION, FCALL), as a Redis
 * before 7.0 would: its limiters run Sentinel's code as scripts, by EVALSHA. Made through `admin`.
 */
export function scriptsOnlyUrl(admin: Redis, server: RedisProcess): Promise<string> {
  return userUrl(admin, server, 'scripts-only', ['-function', '-fcall', '-fcall_ro']);
}

/** Closes the limiter after the test. */
export function owned<L extends Limiter>(limiter: L): L {
  limiters.push(limiter);
  return limiter;
}

export { waitFor };

/**
 * A MONITOR connection duplicated from `watcher`, opened only once `watcher` and every client in
 * `others` are ready. ioredis enters monitoring mode a microtask after MONITOR's OK, so a line
 * for a command sent that moment (another client's ready check, say) can arrive in the same read
 * and break the connection's queue ("Command queue state error").
 */
export async function monitorOnceReady(watcher: Redis, others: readonly Redis[]): Promise<Redis> {
  await Promise.all([watcher, ...others].map((client) => client.ping()));
  const monitor = await watcher.monitor();
  onTestFinished(() => monitor.disconnect());
  monitor.on('error', () => {});
  return monitor;
}

export async function readyClient(server: RedisProcess, options: RedisOptions): Promise<Redis> {
  const client = clientOf(server.url, options);
  await waitFor(() => client.status === 'ready');
  return client;
}

export async function timed<T>(promise: Promise<T>): Promise<{ value: T; ms: number }> {
  const started = performance.now();
  const value = await promise;
  return { value, ms: performance.now() - started };
}

/**
 * A limiter on `client` that records its errors, closed after the test: 10 a day unless
 * `options` say otherwise. A day-long window: no refill or window change blurs exact counts.
 * With `clock`, the scripts run on it instead of Redis's (see script-clock.ts), each call alone.
 */
export function limiterOn(
  client: Redis,
  { clock, ...options }: Partial<LimiterOptions> & { clock?: () => number } = {},
) {
  const errors: SentinelError[] = [];
  const prefix = uniquePrefix('failure');
  const limiter = createLimiter({
    ...onRedis(client, { clock }),
    prefix,
    limit: 10,
    window: '1d',
    onError: (error) => errors.push(error),
    ...options,
  } as LimiterOptions);
  owned(limiter);
  /** Loads the scripts and proves the store healthy; errors before this do not count. */
  async function warmUp(): Promise<void> {
    for (let i = 0; i < 20; i++) {
      if ((await limiter.consume('warm-up')).degraded === undefined) break;
    }
    errors.length = 0;
  }
  return { limiter, errors, prefix, warmUp };
}
