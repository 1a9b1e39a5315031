// Starts N gateway processes (gateway.ts) on one Redis, races requests across them, and stops them.
import { type ChildProcess, spawn } from 'node:child_process';
import { Agent, request } from 'node:http';
import { fileURLToPath } from 'node:url';
import type { PolicyOptions } from '@sentinel/core';

export const ADAPTERS = ['express', 'koa', 'fastify', 'hono', 'fetch'] as const;
export type AdapterName = (typeof ADAPTERS)[number];

/** The gateways' multi-policy route, `/multi`: all-or-nothing means 60 admitted leave hourly 40. */
export const MULTI_POLICIES: PolicyOptions[] = [
  { name: 'hourly', limit: 100, window: '1h', algorithm: 'sliding-window-log' },
  { name: 'burst', limit: 60, window: '1h', algorithm: 'gcra' },
];

/**
 * A runtime other than this Node to run a gateway on, for the adapters that run there (`hono`,
 * `fetch`): Bun or Deno, and the path of its binary.
 */
export interface GatewayRuntime {
  name: 'bun' | 'deno';
  binary: string;
}

export interface GatewaySpec {
  adapter: AdapterName;
  /** @default this process's Node */
  runtime?: GatewayRuntime;
  redisUrl: string;
  /** Key prefix of every limiter; each route adds its group: `${prefix}:${group}`. */
  prefix: string;
  /** Added to the process's Date.now(). @default 0 */
  skewMs?: number;
  /** Of every single-policy route and the naive one. @default 100 */
  limit?: number;
  /** @default '1h' */
  window?: string;
}

/**
 * A running gateway. Routes: `/<algorithm>` (Redis TIME), `/multi` (MULTI_POLICIES), and for
 * comparison only `/naive` (read, decide in JS, write back), `/gateway-clock/token-bucket` and
 * `/gateway-clock/fixed-window` (atomic, on the process's own clock, as the original design's
 * script), and `/clock` (`{ now }`, the process's Date.now()). Requests are identified by
 * their `x-tenant-id` header; each route keeps its own budget. Sentinel's routes admit with
 * `{ ok: true, degraded }`, where `degraded` is the decision's, or null.
 */
export interface Gateway {
  readonly spec: GatewaySpec;
  readonly url: string;
  stop(): Promise<void>;
}

// The gateway runs from this folder, where `--import tsx` finds the example's own tsx.
const FOLDER = fileURLToPath(new URL('.', import.meta.url));
const ENTRY = fileURLToPath(new URL('./gateway.ts', import.meta.url));

// Gateways must not outlive the process that started them, however it ends. (They also exit
// by themselves when their IPC channel closes.)
const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

/** The command that runs gateway.ts: Node with tsx, or Bun or Deno, which run TypeScript themselves. */
function commandOf(runtime: GatewayRuntime | undefined): [string, string[]] {
  if (runtime === undefined) return [process.execPath, ['--import', 'tsx', ENTRY]];
  if (runtime.name === 'bun') return [runtime.binary, [ENTRY]];
  return [runtime.binary, ['run', '--allow-all', ENTRY]];
}

/**
 * Spawns one gateway and waits for its port: over IPC from Node, on stdout from Bun and Deno,
 * which are stopped by closing their stdin.
 */
export async function startGateway(spec: GatewaySpec): Promise<Gateway> {
  const [command, args] = commandOf(spec.runtime);
  const ipc = spec.runtime === undefined;
  const child = spawn(command, args, {
    cwd: FOLDER,
    env: {
      ...process.env,
      GATEWAY_ADAPTER: spec.adapter,
      REDIS_URL: spec.redisUrl,
      GATEWAY_PREFIX: spec.prefix,
      GATEWAY_LIMIT: String(spec.limit ?? 100),
      GATEWAY_WINDOW: spec.window ?? '1h',
      SKEW_MS: String(spec.skewMs ?? 0),
    },
    stdio: ipc ? ['ignore', 'ignore', 'pipe', 'ipc'] : ['pipe', 'pipe', 'pipe'],
  });
  const name = spec.runtime ? `${spec.adapter} on ${spec.runtime.name}` : spec.adapter;
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
    if (child.connected) child.disconnect();
    child.stdin?.end();
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  };
  try {
    const port = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no port within 30 s')), 30_000);
      const reported = (message: { port: number }) => {
        clearTimeout(timer);
        resolve(message.port);
      };
      if (ipc) child.once('message', reported);
      else {
        let out = '';
        child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
          out += chunk;
          const line = out.split('\n')[0];
          if (out.includes('\n') && line) reported(JSON.parse(line) as { port: number });
        });
      }
      void exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`exited with ${child.exitCode ?? child.signalCode}`));
      });
    });
    // A gateway that dies mid-suite fails its requests; say why.
    void exited.then(() => {
      if (!stopping) {
        process.stderr.write(`gateway (${name}) exited unexpectedly:\n${stderr}\n`);
      }
    });
    return { spec, url: `http://127.0.0.1:${port}`, stop };
  } catch (error) {
    await stop();
    throw new Error(`gateway (${name}) did not start: ${String(error)}\n${stderr}`);
  }
}

export interface Fleet {
  readonly gateways: readonly Gateway[];
  /** Stops every gateway and drops the kept-alive connections to them. */
  stop(): Promise<void>;
}

/** Starts the gateways together; if one fails, the others are stopped. */
export async function startGateways(specs: readonly GatewaySpec[]): Promise<Fleet> {
  const started = await Promise.allSettled(specs.map(startGateway));
  const gateways = started.flatMap((result) =>
    result.status === 'fulfilled' ? [result.value] : [],
  );
  const failed = started.find((result) => result.status === 'rejected');
  const stop = async () => {
    agent.destroy();
    await Promise.all(gateways.map((gateway) => gateway.stop()));
  };
  if (failed) {
    await stop();
    throw failed.reason;
  }
  return { gateways, stop };
}

// Up to 64 kept-alive sockets per gateway; queued requests wait for a free one.
const agent = new Agent({ keepAlive: true, maxSockets: 64 });

/** GET `url` with a tenant header: the status and the parsed JSON body. */
export function get(
  url: string,
  tenant = 'none',
): Promise<{
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
}> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent, headers: { 'x-tenant-id': tenant } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
      });
      res.on('end', () => {
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {}
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
      });
      res.on('error', reject);
    });
    req.setTimeout(30_000, () => req.destroy(new Error(`no answer from ${url} in 30 s`)));
    req.on('error', reject);
    req.end();
  });
}

export interface RaceResult {
  /** Responses by status code. */
  statuses: Record<number, number>;
  /** 200s. */
  admitted: number;
  /** 200s by gateway, in the fleet's order. */
  admittedBy: number[];
  /** 200s whose body names a degraded mode: admitted by `onStoreError`, not by Redis. */
  degraded: number;
  /**
   * When each gateway gave its first and its last answer, in `performance.now()` milliseconds, in
   * the fleet's order; `undefined` for a gateway that answered nothing.
   */
  answeringBy: ({ first: number; last: number } | undefined)[];
}

/**
 * Fires `requests` GETs of `path` for one tenant, all at once, round-robin over `gateways`
 * (request i goes to gateway i mod N). They interleave over up to 64 connections per gateway.
 */
export async function race(
  gateways: readonly Gateway[],
  path: string,
  tenant: string,
  requests: number,
): Promise<RaceResult> {
  const statuses: Record<number, number> = {};
  const admittedBy = gateways.map(() => 0);
  const answeringBy: RaceResult['answeringBy'] = gateways.map(() => undefined);
  let degraded = 0;
  await Promise.all(
    Array.from({ length: requests }, async (_, i) => {
      const index = i % gateways.length;
      const { status, body } = await get(`${(gateways[index] as Gateway).url}${path}`, tenant);
      const now = performance.now();
      const span = answeringBy[index];
      if (span) span.last = now;
      else answeringBy[index] = { first: now, last: now };
      statuses[status] = (statuses[status] ?? 0) + 1;
      if (status !== 200) return;
      admittedBy[index] = (admittedBy[index] ?? 0) + 1;
      if ((body as { degraded?: unknown } | null)?.degraded) degraded++;
    }),
  );
  return { statuses, admitted: statuses[200] ?? 0, admittedBy, degraded, answeringBy };
}

/**
 * The most gateways that were answering at one instant of a race: each counts from its first
 * answer to its last. Which process admits the limit's requests is up to the scheduler (on a busy
 * host one process can take them all), but that the processes decided side by side is what makes
 * the race a test of the shared count.
 */
export function answeringAtOnce(result: RaceResult): number {
  const spans = result.answeringBy.filter((span) => span !== undefined);
  return Math.max(
    0,
    ...spans.map(
      ({ first }) => spans.filter((span) => span.first <= first && first <= span.last).length,
    ),
  );
}

/** A tenant no earlier request used, so that no test needs to flush Redis. */
export function freshTenant(label: string): string {
  return `${label}-${process.pid}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
}

/** Unix ms by the Redis server's clock, the one Sentinel's scripts use. */
export async function redisTimeMs(client: { time(): Promise<unknown> }): Promise<number> {
  const [seconds, micros] = (await client.time()) as [number | string, number | string];
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

/**
 * Waits, if needed, until at least `marginMs` remain of the current epoch-aligned window by the
 * Redis clock, so that a fixed window cannot roll over in the middle of a race.
 */
export async function awayFromWindowEdge(
  client: { time(): Promise<unknown> },
  windowMs: number,
  marginMs = 5_000,
): Promise<void> {
  const left = windowMs - ((await redisTimeMs(client)) % windowMs);
  if (left < marginMs) await new Promise((resolve) => setTimeout(resolve, left + 50));
}
