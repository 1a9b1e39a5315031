// Starts Nest gateway processes (packages/nestjs/test/apps/fleet-gateway.ts) on one Redis, for the race demo's `race()` to drive.
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Fleet, Gateway } from '../../examples/race-demo/fleet.ts';
import { nestApp } from './nest-apps.ts';

export type NestPlatform = 'express' | 'fastify';

/**
 * What guards the gateway's routes: Sentinel's guard (`GET /<algorithm>`), or @nestjs/throttler's
 * on SentinelThrottlerStorage or on @nest-lab/throttler-storage-redis (`GET /throttled`).
 */
export type NestFleetMode = 'sentinel' | 'throttler-sentinel' | 'throttler-nestlab';

export interface NestGatewaySpec {
  platform: NestPlatform;
  mode: NestFleetMode;
  redisUrl: string;
  /** Key prefix of Sentinel's limiters (the `sentinel` mode). */
  prefix: string;
  /** Of every route, per tenant and hour. @default 100 */
  limit?: number;
}

// Run from the repository's root, where the tsx loader is found.
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
// tsx's ESM hook alone loads @sentinel/nestjs's TypeScript. Its CommonJS hook would also load
// @nestjs/core a second time for @nestjs/throttler, a CommonJS package that requires it: then
// Nest could not inject the throttler's guard with the app's Reflector.
const COMMAND = [process.execPath, ['--import', 'tsx/esm', nestApp('fleet-gateway')]] as const;
// Four Nest processes starting at once on two busy cores can take a while.
const START_MS = 60_000;

// Gateways must not outlive the process that started them, however it ends. (They also exit by
// themselves when their stdin closes.)
const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

/** Spawns one gateway and waits for the port it reports on stdout; closing its stdin stops it. */
export async function startNestGateway(spec: NestGatewaySpec): Promise<Gateway> {
  const name = `Nest on ${spec.platform}, ${spec.mode}`;
  const child = spawn(COMMAND[0], COMMAND[1], {
    cwd: ROOT,
    env: {
      ...process.env,
      FLEET_PLATFORM: spec.platform,
      FLEET_MODE: spec.mode,
      REDIS_URL: spec.redisUrl,
      FLEET_PREFIX: spec.prefix,
      FLEET_LIMIT: String(spec.limit ?? 100),
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  children.add(child);
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      children.delete(child);
      resolve();
    }),
  );
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-4_000);
  });

  let stopping = false;
  const stop = async (): Promise<void> => {
    stopping = true;
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.stdin?.end();
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  };
  try {
    const port = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no port within ${START_MS} ms`)), START_MS);
      let out = '';
      child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
        out += chunk;
        if (!out.includes('\n')) return;
        clearTimeout(timer);
        resolve((JSON.parse(out.slice(0, out.indexOf('\n'))) as { port: number }).port);
      });
      void exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`exited with ${child.exitCode ?? child.signalCode}`));
      });
    });
    // A gateway that dies mid-suite fails its requests; say why.
    void exited.then(() => {
      if (!stopping) process.stderr.write(`gateway (${name}) exited unexpectedly:\n${stderr}\n`);
    });
    // Described as the race demo describes its gateways: Express or Fastify, here under Nest.
    const { platform: adapter, redisUrl, prefix, limit } = spec;
    return { spec: { adapter, redisUrl, prefix, limit }, url: `http://127.0.0.1:${port}`, stop };
  } catch (error) {
    await stop();
    throw new Error(`gateway (${name}) did not start: ${String(error)}\n${stderr}`);
  }
}

/** Starts the gateways together; if one fails, the others are stopped. */
export async function startNestFleet(specs: readonly NestGatewaySpec[]): Promise<Fleet> {
  const started = await Promise.allSettled(specs.map(startNestGateway));
  const gateways = started.flatMap((result) =>
    result.status === 'fulfilled' ? [result.value] : [],
  );
  const stop = async () => {
    await Promise.all(gateways.map((gateway) => gateway.stop()));
  };
  const failed = started.find((result) => result.status === 'rejected');
  if (failed) {
    await stop();
    throw failed.reason;
  }
  return { gateways, stop };
}
