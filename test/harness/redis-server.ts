// Starts throw-away redis-server processes on free ports, and stops, pauses or restarts them.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { isMainThread } from 'node:worker_threads';
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

let pdeathsig: boolean | undefined;

/**
 * Whether this OS can have the kernel kill a server when the process that started it dies, even
 * by SIGKILL, which runs no exit handler: Linux with util-linux's `setpriv --pdeathsig`.
 */
export function parentDeathSignalAvailable(): boolean {
  pdeathsig ??= process.platform === 'linux' && setprivRuns();
  return pdeathsig;
}

function setprivRuns(): boolean {
  // Tries the option, not only the binary: an old util-linux's setpriv lacks --pdeathsig.
  try {
    execFileSync('setpriv', ['--pdeathsig', 'KILL', '--', 'true'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * The command and arguments that run `binary` with `args` so that it dies with this process,
 * through setpriv where it can: setpriv sets the parent-death signal, then execs the binary, so
 * the child's pid stays the program's own (the one INFO reports and pause() signals). The kernel
 * sends that signal when the spawning *thread* ends, and a worker thread can end before its
 * process: only the main thread uses it.
 */
export function diesWithThisProcess(binary: string, args: readonly string[]): [string, string[]] {
  return isMainThread && parentDeathSignalAvailable()
    ? ['setpriv', ['--pdeathsig', 'KILL', '--', binary, ...args]]
    : [binary, [...args]];
}

// Servers must not outlive the test process, whatever way it ends: where setpriv is missing
// (macOS), this handler is all there is, and a SIGKILLed test process leaves its servers running.
const children = new Set<ChildProcess>();
const folders = new Set<string>();
process.once('exit', () => {
  for (const child of children) child.kill('SIGKILL');
  for (const dir of folders) rmSync(dir, { recursive: true, force: true });
});

export interface RedisProcess {
  readonly port: number;
  readonly url: string;
  /** The running server's process id (INFO's process_id); undefined once stopped. */
  readonly pid: number | undefined;
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

/**
 * Starts a redis-server with no persistence, on `port` or a free one. Extra arguments are
 * passed on.
 */
export async function startRedis(
  extraArgs: readonly string[] = [],
  port?: number,
): Promise<RedisProcess> {
  // Another process may take the free port before the server binds it: try a few ports.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startRedisOnce(extraArgs, port ?? (await freePort()));
    } catch (error) {
      if (attempt === 3 || port !== undefined) throw error;
    }
  }
}

async function startRedisOnce(extraArgs: readonly string[], port: number): Promise<RedisProcess> {
  const binary = requireRedisServer();
  // A replica's first sync writes dump.rdb into the working directory, which every server
  // started there later would load: each server gets a folder of its own.
  const dir = join(tmpdir(), `sentinel-redis-${port}-${process.pid}`);
  folders.add(dir);
  let child: ChildProcess | undefined;
  const launch = async (): Promise<void> => {
    mkdirSync(dir, { recursive: true });
    const [command, args] = diesWithThisProcess(binary, [
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
    ]);
    child = spawn(command, args, { stdio: 'ignore' });
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
    get pid() {
      return child?.pid;
    },
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
