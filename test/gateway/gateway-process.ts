// Runs the gateway of `pnpm start` as a process of its own, as a user would, and stops it after each test.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const MAIN = 'examples/gateway/src/main.ts';

/** Variables the gateway reads: a test sets its own, never inherits the shell's. */
const GATEWAY_VARIABLES = [
  'SENTINEL_CONFIG',
  'PORT',
  'HOST',
  'UPSTREAM_URL',
  'REDIS_URL',
  'REDIS_CLUSTER_NODES',
  'SENTINEL_HEADERS',
  'SENTINEL_ON_STORE_ERROR',
  'LOG_LEVEL',
  'SENTINEL_ADMIN_TOKEN',
  'SENTINEL_STATUS_PAGE',
];

export interface GatewayProcess {
  child: ChildProcess;
  /** Everything written so far. */
  output(): { stdout: string; stderr: string };
  /** The exit code, once the process has ended. */
  exited: Promise<number | null>;
}

const running: ChildProcess[] = [];
afterEach(() => {
  for (const child of running.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
});

/** Spawns the gateway on a free port of the loopback interface. */
export function spawnGateway(
  env: Record<string, string> = {},
  args: readonly string[] = [],
): GatewayProcess {
  const inherited = { ...process.env };
  for (const name of GATEWAY_VARIABLES) delete inherited[name];
  // OpenTelemetry's own, which start the SDK.
  for (const name of Object.keys(inherited)) if (name.startsWith('OTEL_')) delete inherited[name];
  const child = spawn(process.execPath, ['--import', 'tsx', MAIN, ...args], {
    cwd: ROOT,
    env: { ...inherited, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.push(child);
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
  });
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  return { child, output: () => ({ stdout, stderr }), exited };
}

/** Spawns the gateway and resolves to its address once the banner names it. */
export async function startGateway(
  env: Record<string, string> = {},
  args: readonly string[] = [],
): Promise<GatewayProcess & { url: string }> {
  const gateway = spawnGateway(env, args);
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no banner within 30 s:\n${text()}`)), 30_000);
    const text = () => `${gateway.output().stdout}\n${gateway.output().stderr}`;
    gateway.child.stdout?.on('data', () => {
      const found = /listening on (http:\/\/\S+)/.exec(gateway.output().stdout);
      if (found?.[1]) {
        clearTimeout(timer);
        resolve(found[1]);
      }
    });
    gateway.exited.then((code) =>
      reject(new Error(`exited with ${code} before listening:\n${text()}`)),
    );
  });
  return { ...gateway, url };
}

/** Writes a configuration file into a directory of its own; returns its path. */
export function configFile(name: string, text: string): string {
  const path = join(mkdtempSync(join(tmpdir(), 'sentinel-gateway-')), name);
  writeFileSync(path, text);
  return path;
}
