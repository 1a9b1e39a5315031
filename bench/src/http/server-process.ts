// Starts one server under load in a child process and stops it: the load generator, Redis and
// the server then each show up as their own process, as they would in production.
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { supervise } from '../lib/child-process.ts';
import type { Framework, Variant } from './variants.ts';

export interface ServerProcess {
  readonly variant: Variant;
  readonly port: number;
  /** Stops the server; the failures Sentinel reported in it, undefined if it did not say. */
  stop(): Promise<number | undefined>;
}

const BENCH_DIR = fileURLToPath(new URL('../../', import.meta.url));
const SERVER = fileURLToPath(new URL('server.ts', import.meta.url));
const PUBLISHED = fileURLToPath(new URL('../lib/published-sentinel.mjs', import.meta.url));
const STARTUP_MS = 60_000;

/** The numbers the server prints: its port once it listens, its failures as it stops. */
function reports(child: ChildProcess, name: string) {
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  const printed = (word: string) =>
    new Promise<number>((resolve, reject) => {
      const pattern = new RegExp(`^${word} (\\d+)$`);
      lines.on('line', (line) => {
        const match = pattern.exec(line);
        if (match) resolve(Number(match[1]));
      });
      child.once('close', (code, signal) =>
        reject(new Error(`${name} exited (${code ?? signal}) before it printed ${word}`)),
      );
    });
  return { port: printed('listening'), failures: printed('failures') };
}

export async function startServer(
  framework: Framework,
  variant: Variant,
  redisUrl: string,
): Promise<ServerProcess> {
  const args = ['--import', 'tsx', '--import', PUBLISHED, SERVER, framework, variant, redisUrl];
  const child = spawn(process.execPath, args, {
    cwd: BENCH_DIR,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const supervised = supervise(child);
  const printed = reports(child, `${framework} ${variant}`);
  printed.failures.catch(() => {});
  const startup = setTimeout(() => supervised.kill(), STARTUP_MS);
  let port: number;
  try {
    port = await printed.port;
  } catch (error) {
    supervised.kill();
    throw error;
  } finally {
    clearTimeout(startup);
  }
  return {
    variant,
    port,
    async stop() {
      await supervised.stop();
      return printed.failures.catch(() => undefined);
    },
  };
}
