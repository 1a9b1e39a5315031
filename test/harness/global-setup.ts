// Starts one shared throw-away Redis for the run (or uses REDIS_URL) and hands its URL to suites.
import type { TestProject } from 'vitest/node';
import { assertRedisAvailable, type RedisProcess, startRedis } from './redis-server.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string;
  }
}

let server: RedisProcess | undefined;

export async function setup(project: TestProject): Promise<void> {
  assertRedisAvailable();
  let url = process.env.REDIS_URL;
  if (!url) {
    server = await startRedis();
    url = server.url;
  }
  project.provide('redisUrl', url);
}

export async function teardown(): Promise<void> {
  await server?.stop();
}
