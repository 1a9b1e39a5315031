// Starts throw-away redis-server processes on free ports, and stops, pauses or restarts them.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';

const INSTALL_HINT =
  'Sentinel tests need Redis: install the redis-server binary (Debian/Ubuntu: `apt-get install redis-server`, ' +
  'macOS: `brew install redis`), or set REDIS_URL to a Redis server the tests may write to.';

/** The redis-server binary on the PATH (or in REDIS_SERVER_BIN), or undefined. */
export function findRedisServer(): string | undefined {
  const explicit = process.env.REDIS_SERVER_BIN;
  if (explicit) return explicit;
  try {
    return (
      execFileSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' }).trim() ||
      undefined
    );
  } catch {
    return undefined;
  }
}

export function requireRedisServer(): string {
  const binary = findRedisServer();
  if (!binary) throw new Error(`redis-server was not found. ${INSTALL_HINT}`);
  return binary;
}

export function assertRedisAvailable(): void {
  if (!process.env.REDIS_URL && !findRedisServer()) {
    throw new Error(`Neither REDIS_URL nor a redis-server binary is available. ${INSTALL_HINT}`);
  }
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => {
        if (address && typeof address === 'object') resolve(address.port);
        else reject(new Error('no port'));
      });
    });
  });
}

// Servers must not outlive the test process, whatever way it ends.
const children = new Set<ChildProcess>();
const folders = new Set<string>();
process.once('exit', () => {
  for (const child of children) child.kill('SIGKILL');
  for (const dir of folders) rmSync(dir, { recursive: true, force: true });
});

export interface RedisProcess {
  readonly port: number;
  readonly url: string;
  /** Kills the server (SIGKILL) and waits for it to exit. */
  stop(): Promise<void>;
  /** Starts it again on the same port, empty. */
  restart(): Promise<void>;
  /** SIGSTOP: the server keeps its connections but answers nothing. */
  pause(): void;
  resume(): void;
}

/** Waits until the server on `port` answers and is the process `child`, not another one. */
async function waitForServer(
  port: number,
  child: ChildProcess,
  deadlineMs = 10_000,
): Promise<void> {
  const started = Date.now();
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`redis-server on port ${port} exited at start (is the port taken?)`);
    }
    const probe = new Redis({
      port,
      host: '127.0.0.1',
      lazyConnect: true,
      retryStrategy: () => null,
      maxRetriesPerRequest: 0,
    });
    probe.on('error', () => {});
    try {
      await probe.connect();
      const info = await probe.info('server');
      if (!info.includes(`process_id:${child.pid}\r\n`)) {
        throw new Error(`port ${port} is served by another process`);
      }
      return;
    } catch (error) {
      if (Date.now() - started > deadlineMs)
        throw new Error(`redis-server on port ${port} did not start: ${String(error)}`);
      await sleep(20);
    } finally {
      probe.disconnect();
    }
  }
}

/** Starts a redis-server on a free port with no persistence. Extra arguments are passed on. */
export async function startRedis(extraArgs: readonly string[] = []): Promise<RedisProcess> {
  // Another process may take the free port before the server binds it: try a few ports.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startRedisOnce(extraArgs);
    } catch (error) {
      if (attempt === 3) throw error;
    }
  }
}

async function startRedisOnce(extraArgs: readonly string[]): Promise<RedisProcess> {
  const binary = requireRedisServer();
  const port = await freePort();
  // A replica's first sync writes dump.rdb into the working directory, which every server
  // started there later would load: each server gets a folder of its own.
  const dir = join(tmpdir(), `sentinel-redis-${port}-${process.pid}`);
  folders.add(dir);
  let child: ChildProcess | undefined;
  const launch = async (): Promise<void> => {
    mkdirSync(dir, { recursive: true });
    child = spawn(
      binary,
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
        '--protected-mode',
        'no',
        '--dir',
        dir,
        ...extraArgs,
      ],
      { stdio: 'ignore' },
    );
    const started = child;
    children.add(started);
    started.once('exit', () => children.delete(started));
    await waitForServer(port, started);
  };
  await launch();
  const stop = async (): Promise<void> => {
    const current = child;
    child = undefined;
    if (current && current.exitCode === null) {
      const exited = new Promise((resolve) => current.once('exit', resolve));
      current.kill('SIGCONT');
      current.kill('SIGKILL');
      await exited;
    }
    // A restart starts from an empty folder, like the empty server it promises.
    rmSync(dir, { recursive: true, force: true });
  };
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    stop,
    async restart() {
      await stop();
      await launch();
    },
    pause() {
      child?.kill('SIGSTOP');
    },
    resume() {
      child?.kill('SIGCONT');
    },
  };
}
