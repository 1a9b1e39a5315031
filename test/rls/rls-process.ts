// The sentinel-rls bin as users run it, in a child process on free ports, with a config file
// of the test's, and a grpc-js client of its ShouldRateLimit and health services.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { freePort } from '../harness/redis-server.ts';

const root = new URL('../..', import.meta.url).pathname;
const BIN = join(root, 'packages/rls/src/bin.ts');
const PROTO_DIR = join(root, 'packages/rls/proto');

/** Writes YAML to a fresh directory: the path of the file. */
export function configFile(yaml: string, name = 'config.yaml'): string {
  const dir = mkdtempSync(join(tmpdir(), 'sentinel-rls-'));
  const path = join(dir, name);
  writeFileSync(path, yaml);
  return path;
}

export interface RlsProcess {
  readonly grpcPort: number;
  readonly httpPort: number;
  readonly child: ChildProcess;
  /** What it wrote to stderr so far. */
  stderr(): string;
  /** SIGTERM, and its exit. */
  stop(): Promise<void>;
}

/** Runs the bin to its exit: for settings and configurations it must refuse. */
export function runToExit(
  args: readonly string[],
  env: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', BIN, ...args], {
      cwd: root,
      env: { ...process.env, GRPC_PORT: '0', PORT: '0', LOG_LEVEL: 'warn', ...env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => {
      stdout += chunk;
      // A bin that started after all is stopped, so the test sees its output and fails.
      if (stdout.includes('sentinel-rls ready')) child.kill('SIGTERM');
    });
    child.stderr.on('data', (chunk) => {
      stderr += chunk;
    });
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

/**
 * Waits out the last two seconds of a minute, so that a test's calls share one minute's window:
 * per-minute limits count in windows aligned to the minute, on the clock of the local Redis.
 */
export async function awayFromMinuteEdge(): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < 2_000) await new Promise((resolve) => setTimeout(resolve, left + 50));
}

/**
 * Starts the bin and waits for it to say both listeners are up. A port found free can be taken
 * by another suite's server before the bin listens on it: that start is tried again, on new
 * ports, as the harness does for redis-server.
 */
export async function startRls(
  args: readonly string[],
  env: Record<string, string> = {},
): Promise<RlsProcess> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startRlsOnce(args, env, await freePort(), await freePort());
    } catch (error) {
      if (attempt === 3 || !String(error).includes('EADDRINUSE')) throw error;
    }
  }
}

async function startRlsOnce(
  args: readonly string[],
  env: Record<string, string>,
  grpcPort: number,
  httpPort: number,
): Promise<RlsProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', BIN, ...args], {
    cwd: root,
    env: {
      ...process.env,
      GRPC_HOST: '127.0.0.1',
      GRPC_PORT: String(grpcPort),
      HOST: '127.0.0.1',
      PORT: String(httpPort),
      LOG_LEVEL: 'warn',
      ...env,
    },
  });
  let stderr = '';
  child.stderr?.on('data', (chunk) => {
    stderr += chunk;
  });
  await new Promise<void>((resolve, reject) => {
    let stdout = '';
    const timer = setTimeout(
      () => reject(new Error(`sentinel-rls did not start: ${stderr}`)),
      30_000,
    );
    child.stdout?.on('data', (chunk) => {
      stdout += chunk;
      if (stdout.includes('sentinel-rls ready')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`sentinel-rls exited with ${code}: ${stderr}`));
    });
  });
  return {
    grpcPort,
    httpPort,
    child,
    stderr: () => stderr,
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

interface Loaded {
  envoy: { service: { ratelimit: { v3: { RateLimitService: grpc.ServiceClientConstructor } } } };
  grpc: { health: { v1: { Health: grpc.ServiceClientConstructor } } };
}

/** A generated client's unary method, called with a callback. */
type UnaryCall = (...args: unknown[]) => void;

let loaded: Loaded | undefined;

function definitions(): Loaded {
  loaded ??= grpc.loadPackageDefinition(
    protoLoader.loadSync(['envoy/service/ratelimit/v3/rls.proto', 'grpc/health/v1/health.proto'], {
      includeDirs: [PROTO_DIR],
      keepCase: true,
      longs: Number,
      enums: String,
      defaults: true,
    }),
  ) as unknown as Loaded;
  return loaded;
}

/** A descriptor as the wire has it: entries, and an optional override. */
export interface WireDescriptor {
  entries: Array<{ key: string; value: string }>;
  limit?: { requests_per_unit: number; unit: string };
}

export interface WireStatus {
  code: string;
  current_limit: { name: string; requests_per_unit: number; unit: string } | null;
  limit_remaining: number;
  duration_until_reset: { seconds: number; nanos: number } | null;
}

export interface WireResponse {
  overall_code: string;
  statuses: WireStatus[];
  response_headers_to_add: Array<{ key: string; value: string }>;
}

export interface RlsClient {
  shouldRateLimit(
    domain: string,
    descriptors: WireDescriptor[],
    hitsAddend?: number,
    deadlineMs?: number,
  ): Promise<WireResponse>;
  health(service?: string): Promise<string>;
  close(): void;
}

/** A grpc-js client of the service at `port`, as Envoy keeps one channel. */
export function rlsClient(port: number): RlsClient {
  const { envoy, grpc: health } = definitions();
  const address = `127.0.0.1:${port}`;
  const credentials = grpc.credentials.createInsecure();
  const rls = new envoy.service.ratelimit.v3.RateLimitService(address, credentials);
  const checker = new health.health.v1.Health(address, credentials);
  return {
    shouldRateLimit: (domain, descriptors, hitsAddend = 0, deadlineMs = 10_000) =>
      new Promise((resolve, reject) => {
        (rls as unknown as Record<string, UnaryCall>).ShouldRateLimit?.(
          { domain, descriptors, hits_addend: hitsAddend },
          { deadline: Date.now() + deadlineMs },
          (error: Error | null, response: WireResponse) =>
            error ? reject(error) : resolve(response),
        );
      }),
    health: (service = '') =>
      new Promise((resolve, reject) => {
        (checker as unknown as Record<string, UnaryCall>).Check?.(
          { service },
          (error: Error | null, response: { status: string }) =>
            error ? reject(error) : resolve(response.status),
        );
      }),
    close() {
      rls.close();
      checker.close();
    },
  };
}
