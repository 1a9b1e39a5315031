// Bounded concurrent HTTP load from a worker thread: each response's status, latency and decision.
import { type Agent, request } from 'node:http';
import { Worker } from 'node:worker_threads';

/** One response, kept small: a run records thousands. */
export interface Sample {
  /** When the request was sent, in Unix ms with a fraction (see `now()`). */
  sentAt: number;
  /** Milliseconds until the whole response was read. */
  ms: number;
  /** The HTTP status, or 0 when the request failed without a response. */
  status: number;
  contentType: string;
  /** The identity (x-user header) the request carried. */
  user: string;
  /** The exposed decision's `degraded`, for a 200. */
  degraded: string | undefined;
  /** The exposed decision's `remaining`, for a 200. */
  remaining: number | undefined;
  /** A degraded 200 decided without calling Redis: the circuit breaker was open. */
  skipped: boolean;
  /** The parsed body of a response other than 200. */
  body: unknown;
}

/** Unix ms with a fraction, comparable between threads (performance.now() is not). */
export function now(): number {
  return performance.timeOrigin + performance.now();
}

// The worker's code, plain JavaScript so it needs no loader: `get` and the loop, as in this file.
const WORKER = `
const { Agent, request } = require('node:http');
const { parentPort, workerData } = require('node:worker_threads');
const now = () => performance.timeOrigin + performance.now();
${toSample.toString()}
${get.toString()}
const { url, concurrency, maxMs, maxRequests, users } = workerData;
const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
const endAt = now() + maxMs;
const samples = [];
let sent = 0;
let stopped = false;
parentPort.on('message', () => { stopped = true; });
async function worker() {
  while (!stopped && sent < maxRequests && now() < endAt) {
    samples.push(await get(url, users[sent++ % users.length], agent, request, now));
  }
}
Promise.all(Array.from({ length: concurrency }, worker)).then(() => {
  agent.destroy();
  parentPort.postMessage(samples);
});
`;

function toSample(
  sentAt: number,
  ms: number,
  user: string,
  status: number,
  contentType = '',
  text = '',
): Sample {
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {}
  const decision =
    status === 200
      ? (body as { rateLimit?: { degraded?: string; remaining: number; error?: unknown } | null })
          .rateLimit
      : undefined;
  return {
    sentAt,
    ms,
    status,
    contentType,
    user,
    degraded: decision?.degraded,
    remaining: decision?.remaining,
    // The decision carries the store's error, unless the breaker answered without the store.
    skipped: decision?.degraded !== undefined && decision.error === undefined,
    body: status === 200 ? undefined : body,
  };
}

/** One GET with the x-user header, on a kept-alive connection of `agent`. */
export function get(
  url: string,
  user: string,
  agent?: Agent,
  send = request,
  clock = now,
): Promise<Sample> {
  const sentAt = clock();
  return new Promise((resolve) => {
    const done = (status: number, contentType?: string, text?: string) =>
      resolve(toSample(sentAt, clock() - sentAt, user, status, contentType, text));
    const req = send(url, { agent, headers: { 'x-user': user } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('error', () => done(0));
      res.on('end', () => done(res.statusCode ?? 0, res.headers['content-type'], chunks.join('')));
    });
    // A request that hangs must not hang the test: it is recorded as failed.
    req.setTimeout(5_000, () => req.destroy());
    req.on('error', () => done(0));
    req.end();
  });
}

export interface LoadOptions {
  /** Requests in flight at once. */
  concurrency: number;
  /** Stop sending after this long (ms), if stop() was not called first. */
  maxMs: number;
  /** Never send more than this many requests in all. */
  maxRequests: number;
  /** The identities (x-user header) the requests take in turn. */
  users: readonly string[];
}

export interface Load {
  /** Every sample, once the load has ended (by stop(), its time limit or its count). */
  done: Promise<Sample[]>;
  /** Stops sending; resolves with every sample once the requests in flight have completed. */
  stop(): Promise<Sample[]>;
}

/**
 * Keeps `concurrency` requests in flight until stop(), the time limit or the count ends it. The
 * requests come from a worker thread, as from clients elsewhere: the app's event loop does the
 * app's work only, and what is measured is the app's latency.
 */
export function startLoad(url: string, options: LoadOptions): Load {
  const worker = new Worker(WORKER, { eval: true, workerData: { url, ...options } });
  const done = new Promise<Sample[]>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
    worker.once('exit', () => reject(new Error('the load worker exited without its samples')));
  });
  return {
    done,
    stop() {
      worker.postMessage('stop');
      return done;
    },
  };
}

/** `count` identities named `${name}-0`, `${name}-1`, ... */
export function identities(name: string, count: number): string[] {
  return Array.from({ length: count }, (_, i) => `${name}-${i}`);
}

/** The p-th percentile (0 to 100) of the samples' latencies, by nearest rank. */
export function percentile(samples: readonly Sample[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = samples.map((s) => s.ms).sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)] as number;
}

/** Count, p50, p99 and max latency (ms, one decimal), for assertion messages. */
export function latencies(samples: readonly Sample[]): string {
  const ms = (p: number) => percentile(samples, p).toFixed(1);
  return `n=${samples.length} p50=${ms(50)} p99=${ms(99)} max=${ms(100)}`;
}

/** How many samples had each status, as { '200': n, '429': m }. */
export function statuses(samples: readonly Sample[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const { status } of samples) counts[status] = (counts[status] ?? 0) + 1;
  return counts;
}

/** Samples sent in [from, to). */
export function sentBetween(samples: readonly Sample[], from: number, to = Infinity): Sample[] {
  return samples.filter((s) => s.sentAt >= from && s.sentAt < to);
}
