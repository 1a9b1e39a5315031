// Checks the connection suites repeat for every client library: counts, command statistics, an adapter's answers.
import type { Redis } from 'ioredis';
import {
  byHeader,
  type Decision,
  type RedisClient,
  type SentinelError,
} from '../../packages/core/src/index.ts';
import { driver } from '../adapters/express.ts';

/** Counts are what these suites measure: a slow machine must not decide them, nor hide an error. */
export const STEADY = {
  timeout: 10_000,
  onError: (error: SentinelError) => {
    throw error;
  },
};

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
      timeout: 10_000,
      identify: byHeader('x-tenant-id'),
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
