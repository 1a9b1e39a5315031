// Starts one server under load in a child process and stops it: the load generator, Redis and
// the server then each show up as their own process, as they would in production.
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { bunBinary } from '../lib/bun-binary.ts';
import { supervise } from '../lib/child-process.ts';
import { type Framework, isNest, type Runtime, type Variant } from './variants.ts';

export interface ServerProcess {
  readonly variant: Variant;
  readonly port: number;
  /** Stops the server; the failures Sentinel reported in it, undefined if it did not say. */
  stop(): Promise<number | undefined>;
}

const BENCH_DIR = fileURLToPath(new URL('../../', import.meta.url));
const SERVER = fileURLToPath(new URL('server.ts', import.meta.url));
const PUBLISHED = fileURLToPath(new URL('../lib/published-sentinel.mjs', import.meta.url));
const PUBLISHED_BUN = fileURLToPath(new URL('../lib/published-sentinel-bun.mjs', import.meta.url));
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

/** The command that runs the server on `runtime`, Sentinel loaded from its built files either way. */
function command(framework: Framework, runtime: Runtime): [string, string[]] {
  if (runtime === 'bun') return [bunBinary(), ['--preload', PUBLISHED_BUN, SERVER]];
  // @nestjs/throttler, CommonJS, requires the ESM-only @nestjs/core: tsx's CommonJS hook would load
  // a second copy, whose Reflector Nest cannot inject. Node's own require(esm) shares the one copy.
  const tsx = isNest(framework) ? 'tsx/esm' : 'tsx';
  return [process.execPath, ['--import', tsx, '--import', PUBLISHED, SERVER]];
}

export async function startServer(
  framework: Framework,
  variant: Variant,
  redisUrl: string,
  runtime: Runtime = 'node',
): Promise<ServerProcess> {
  const [file, args] = command(framework, runtime);
  const child = spawn(file, [...args, framework, variant, redisUrl], {
    cwd: BENCH_DIR,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const supervised = supervise(child);
  const printed = reports(child, `${framework} ${variant} on ${runtime}`);
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
