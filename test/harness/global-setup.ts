// Starts one shared throw-away Redis for the run (or uses REDIS_URL) and hands its URL to suites.
import { setPriority } from 'node:os';
import type { TestProject } from 'vitest/node';
import { compileNestApps } from './nest-apps.ts';
import { assertRedisAvailable, type RedisProcess, startRedis } from './redis-server.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string;
  }
}

let server: RedisProcess | undefined;

export async function setup(project: TestProject): Promise<void> {
  assertRedisAvailable();
  compileNestApps();
  let url = process.env.REDIS_URL;
  if (!url) {
    server = await startRedis();
    url = server.url;
    giveFirstClaimToCpu(server);
  }
  project.provide('redisUrl', url);
}

export async function teardown(): Promise<void> {
  await server?.stop();
}

/**
 * The suites share this server from two workers at once, beside the gateways, browsers and
 * servers they start, on machines of 2 cores. A Redis kept waiting for a core sends nothing, and
 * under the default 50 ms deadline a limiter rightly decides without it; in production Redis
 * has cores of its own. So it gets the first claim to a core where the system allows it (root,
 * or CAP_SYS_NICE), and the suites test the limiter rather than the scheduler. A CPU hog beside
 * a suite still loads the limiter's process, which is what such suites prove the deadline
 * against; servers a suite starts for itself keep the usual priority.
 */
function giveFirstClaimToCpu(server: RedisProcess): void {
  try {
    if (server.pid !== undefined) setPriority(server.pid, -10);
  } catch {
    // Not allowed here: the suites run as they are.
  }
}
