// A redis-server of the demo's own, for when none answers: a free port, no persistence, gone on exit.
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';

export interface ThrowawayRedis {
  readonly url: string;
  /** Kills the server and waits for it to exit. */
  stop(): Promise<void>;
}

/** A port nothing listens on right now; the server may still lose it to another process. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** Resolves once the server answers PING; rejects if it exits first or takes over 10 s. */
async function answering(url: string, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`redis-server exited at start (${child.exitCode ?? child.signalCode})`);
    }
    const probe = new Redis(url, { lazyConnect: true, retryStrategy: () => null });
    probe.on('error', () => {});
    try {
      await probe.connect();
      if ((await probe.ping()) === 'PONG') return;
    } catch (error) {
      if (Date.now() > deadline) throw new Error(`redis-server did not answer: ${String(error)}`);
      await sleep(20);
    } finally {
      probe.disconnect();
    }
  }
}

/**
 * Starts `redis-server` from the PATH on 127.0.0.1 and a free port, saving nothing to disk. It is
 * killed when this process exits; rejects with `code: 'ENOENT'` when there is no redis-server.
 */
export async function startThrowawayRedis(): Promise<ThrowawayRedis> {
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' },
  );
  // A binary that could not start has no pid; its error follows on the next tick.
  if (child.pid === undefined) {
    throw await new Promise<Error>((resolve) => child.once('error', resolve));
  }
  const kill = () => child.kill('SIGKILL');
  process.once('exit', kill);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async (): Promise<void> => {
    process.off('exit', kill);
    if (child.exitCode === null && child.signalCode === null) {
      kill();
      await exited;
    }
  };
  try {
    await answering(url, child);
  } catch (error) {
    await stop();
    throw error;
  }
  return { url, stop };
}
