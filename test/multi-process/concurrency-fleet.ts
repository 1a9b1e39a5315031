// Starts gateway processes (concurrency-server.ts) on one Redis, sends them requests, reads the
// counts their handlers keep in Redis, and kills or stops them.
import { type ChildProcess, spawn } from 'node:child_process';
import { Agent, request } from 'node:http';
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';

export const ADAPTERS = ['express', 'koa', 'fastify'] as const;
export type AdapterName = (typeof ADAPTERS)[number];

export interface ServerSpec {
  adapter: AdapterName;
  redisUrl: string;
  /** Key prefix of the limiter. */
  prefix: string;
  /** Key prefix of the handlers' counts; every process of a fleet shares it. */
  counters: string;
  /** @default 5 */
  concurrency?: number;
  /** The policy's lease, such as '2s'. @default the limiter's, a minute */
  lease?: string;
  /** How long /slow runs. @default 300 */
  slowMs?: number;
  /** `shed.concurrency`, with the default reserve of 0.2. @default no shedding */
  shed?: number;
}

export interface Server {
  readonly spec: ServerSpec;
  readonly url: string;
  /** Sends `signal` (SIGKILL by default) and waits for the process to be gone. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  stop(): Promise<void>;
}

// Run from the repository's root, where `--import tsx` finds its tsx.
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const ENTRY = fileURLToPath(new URL('./concurrency-server.ts', import.meta.url));

// Servers must not outlive the process that started them, however it ends. (They also exit by
// themselves when their IPC channel closes.)
const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

/** Spawns one server (`node --import tsx concurrency-server.ts`) and waits for its address. */
export async function startServer(spec: ServerSpec): Promise<Server> {
  const child = spawn(process.execPath, ['--import', 'tsx', ENTRY], {
    cwd: ROOT,
    env: {
      ...process.env,
      SERVER_ADAPTER: spec.adapter,
      REDIS_URL: spec.redisUrl,
      SERVER_PREFIX: spec.prefix,
      SERVER_COUNTERS: spec.counters,
      SERVER_CONCURRENCY: String(spec.concurrency ?? 5),
      SERVER_SLOW_MS: String(spec.slowMs ?? 300),
      ...(spec.lease !== undefined && { SERVER_LEASE: spec.lease }),
      ...(spec.shed !== undefined && { SERVER_SHED: String(spec.shed) }),
    },
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
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

  let ending = false;
  const gone = () => child.exitCode !== null || child.signalCode !== null;
  const stop = async (): Promise<void> => {
    ending = true;
    if (gone()) return;
    if (child.connected) child.disconnect();
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  };
  const kill = async (signal: NodeJS.Signals = 'SIGKILL'): Promise<void> => {
    ending = true;
    if (gone()) return;
    child.kill(signal);
    await exited;
  };
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no address within 30 s')), 30_000);
      child.once('message', (message: { url: string }) => {
        clearTimeout(timer);
        resolve(message.url);
      });
      void exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`exited with ${child.exitCode ?? child.signalCode}`));
      });
    });
    // A server that dies mid-suite, unasked, fails its requests; say why.
    void exited.then(() => {
      if (!ending)
        process.stderr.write(`server (${spec.adapter}) exited unexpectedly:\n${stderr}\n`);
    });
    return { spec, url, kill, stop };
  } catch (error) {
    await stop();
    throw new Error(`server (${spec.adapter}) did not start: ${String(error)}\n${stderr}`);
  }
}

export interface Fleet {
  readonly servers: readonly Server[];
  /** Stops every server still running and drops the kept-alive connections to them. */
  stop(): Promise<void>;
}

/** Starts the servers together; if one fails, the others are stopped. */
export async function startFleet(specs: readonly ServerSpec[]): Promise<Fleet> {
  const started = await Promise.allSettled(specs.map(startServer));
  const servers = started.flatMap((result) =>
    result.status === 'fulfilled' ? [result.value] : [],
  );
  const stop = async () => {
    await Promise.all(servers.map((server) => server.stop()));
    agent.destroy();
  };
  const failed = started.find((result) => result.status === 'rejected');
  if (failed) {
    await stop();
    throw failed.reason;
  }
  return { servers, stop };
}

// Enough kept-alive sockets per server that a race's requests all go out at once.
const agent = new Agent({ keepAlive: true, maxSockets: 256 });

export interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
  /** Date.now() when the request was sent, and when its answer had been read. */
  sentAt: number;
  answeredAt: number;
}

/** GET `url`: the status, headers and parsed JSON body. */
export function get(url: string): Promise<Reply> {
  const sentAt = Date.now();
  return new Promise((resolve, reject) => {
    const req = request(url, { agent }, (res) => {
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
        const { statusCode = 0, headers } = res;
        resolve({ status: statusCode, headers, body, sentAt, answeredAt: Date.now() });
      });
      res.on('error', reject);
    });
    req.setTimeout(30_000, () => req.destroy(new Error(`no answer from ${url} in 30 s`)));
    req.on('error', reject);
    req.end();
  });
}

/** Whether an admitted request's body says a store-error mode admitted it, not Redis. */
export function degraded(reply: Reply): boolean {
  const body = reply.body as { rateLimit?: { degraded?: unknown } | null } | null;
  return body?.rateLimit?.degraded !== undefined && body.rateLimit.degraded !== null;
}

export interface RaceResult {
  replies: Reply[];
  /** Responses by status code. */
  statuses: Record<number, number>;
  admitted: number;
  /** 200s by server, in the order given. */
  admittedBy: number[];
  /** 200s admitted by a store-error mode rather than by Redis. */
  degraded: number;
}

/**
 * Sends `requests` GETs of `path` all at once, round-robin over `servers` (request i goes to
 * server i mod N).
 */
export async function race(
  servers: readonly Server[],
  path: string,
  requests: number,
): Promise<RaceResult> {
  const statuses: Record<number, number> = {};
  const admittedBy = servers.map(() => 0);
  const replies = await Promise.all(
    Array.from({ length: requests }, async (_, i) => {
      const index = i % servers.length;
      const reply = await get(`${(servers[index] as Server).url}${path}`);
      statuses[reply.status] = (statuses[reply.status] ?? 0) + 1;
      if (reply.status === 200) admittedBy[index] = (admittedBy[index] ?? 0) + 1;
      return reply;
    }),
  );
  return {
    replies,
    statuses,
    admitted: statuses[200] ?? 0,
    admittedBy,
    degraded: replies.filter(degraded).length,
  };
}

export interface HandlerCounts {
  /** Handlers of /slow and /hold running now, across every process. */
  running: number;
  /** Handlers that have started. */
  entered: number;
  /** The most that ever ran at once. */
  most: number;
}

/** The counts the fleet's handlers keep under `counters` (see concurrency-server.ts). */
export async function handlerCounts(redis: Redis, counters: string): Promise<HandlerCounts> {
  const [running, entered, most] = await Promise.all([
    redis.get(`${counters}:running`),
    redis.get(`${counters}:entered`),
    redis.zscore(`${counters}:most`, 'most'),
  ]);
  return { running: Number(running ?? 0), entered: Number(entered ?? 0), most: Number(most ?? 0) };
}

/** Clears the counts, between races, while no handler runs. */
export async function resetHandlerCounts(redis: Redis, counters: string): Promise<void> {
  await redis.del(`${counters}:running`, `${counters}:entered`, `${counters}:most`);
}
