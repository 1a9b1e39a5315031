// A throw-away redis-server for the bench, on a free port, so figures never depend on (or
// disturb) a Redis someone else uses.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';

export interface BenchRedis {
  readonly port: number;
  readonly url: string;
  /** A plain client for set-up and INFO; not the one under measurement. */
  readonly admin: Redis;
  pause(): void;
  resume(): void;
  stop(): Promise<void>;
}

/** A port nothing listens on now. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer().unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address
          ? resolve(address.port)
          : reject(new Error('no port')),
      );
    });
  });
}

export async function startRedis(): Promise<BenchRedis> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'sentinel-bench-'));
  const child: ChildProcess = spawn(
    'redis-server',
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
    ],
    { stdio: 'ignore' },
  );
  const killed = (): void => void child.kill('SIGKILL');
  process.once('exit', killed);
  const admin = new Redis({ port, host: '127.0.0.1', lazyConnect: true, retryStrategy: () => 20 });
  admin.on('error', () => {});
  for (let waited = 0; ; waited += 20) {
    try {
      await admin.connect();
      await admin.ping();
      break;
    } catch (error) {
      if (waited > 10_000 || child.exitCode !== null)
        throw new Error(`redis-server did not start: ${error}`);
      admin.disconnect();
      await sleep(20);
    }
  }
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    admin,
    pause: () => void child.kill('SIGSTOP'),
    resume: () => void child.kill('SIGCONT'),
    async stop() {
      child.kill('SIGCONT');
      admin.disconnect();
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
      process.off('exit', killed);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The commands that run a limiter's Lua: FCALL of Sentinel's function library once it is loaded,
 * EVALSHA, and EVAL after NOSCRIPT.
 */
export const SCRIPT_COMMANDS: readonly string[] = ['fcall', 'evalsha', 'eval'];

/** Microseconds of Redis CPU per call, by command, since the last CONFIG RESETSTAT. */
export async function commandStats(
  admin: Redis,
): Promise<Map<string, { calls: number; usecPerCall: number }>> {
  const info = await admin.info('commandstats');
  const stats = new Map<string, { calls: number; usecPerCall: number }>();
  for (const line of info.split('\r\n')) {
    const match = /^cmdstat_([^:]+):calls=(\d+),usec=\d+,usec_per_call=([\d.]+)/.exec(line);
    if (match)
      stats.set(match[1] as string, { calls: Number(match[2]), usecPerCall: Number(match[3]) });
  }
  return stats;
}
