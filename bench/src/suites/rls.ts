// RLS: sentinel-rls, Envoy's rate limit service, against the least such a service can do per
// call: a gRPC server whose ShouldRateLimit runs the one-call floor script once and answers OK.
// Both run in child processes of their own on the bench's Redis, each driven through one grpc-js
// channel, as Envoy keeps one. Run as `node --import tsx --import <published-sentinel.mjs>
// rls.ts floor <redis-url>`, this file is the floor's server.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { loadSync, type Options } from '@grpc/proto-loader';
import { connect } from '../http/redis-clients.ts';
import { supervise } from '../lib/child-process.ts';
import {
  alternate,
  type Contender,
  median,
  ms,
  quantile,
  type Ratio,
  rate,
  type Suite,
  type SuiteReport,
  saturate,
  times,
} from '../lib/measure.ts';
import { freePort, startRedis } from '../lib/redis-server.ts';
import { FLOOR_SCRIPT } from '../reference-script.ts';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const BENCH_DIR = fileURLToPath(new URL('../../', import.meta.url));
const THIS_FILE = fileURLToPath(import.meta.url);
const PUBLISHED = fileURLToPath(new URL('../lib/published-sentinel.mjs', import.meta.url));
/**
 * The bin as `npx sentinel-rls` runs it: the built dist/bin.mjs (`pnpm bench` builds first),
 * with @sentinel/core's built files too, as every other suite measures them.
 */
const BIN = join(ROOT, 'packages/rls/dist/bin.mjs');
const PROTO_DIR = join(ROOT, 'packages/rls/proto');
const PROTO = 'envoy/service/ratelimit/v3/rls.proto';
const SERVICE = 'envoy.service.ratelimit.v3.RateLimitService';
/** What proto-loader makes of messages, on both sides: camelCase, enums as numbers, defaults set. */
const LOADER: Options = {
  keepCase: false,
  longs: Number,
  enums: Number,
  defaults: true,
  oneofs: true,
  includeDirs: [PROTO_DIR],
};
const OK = 1;

/** The bin's line once both servers listen: `sentinel-rls ready: grpc=<host>:<port> http=…`. */
const READY = /^sentinel-rls ready\b(?:.*\bgrpc=\S*:(\d+))?/;
const FLOOR_READY = /^floor listening (\d+)$/;
const STARTUP_MS = 20_000;
/** A call that takes longer is a failure, so that a hung server cannot hang the bench. */
const CALL_DEADLINE_MS = 5_000;
const FLOOR_GOAL = 0.95;

/** Far above what the hot tenant sees, so every call is admitted and does the full consume. */
const REQUESTS_PER_SECOND = 1_000_000_000;
const CONFIG = `domain: bench
descriptors:
  - key: tenant
    rate_limit: { unit: second, requests_per_unit: ${REQUESTS_PER_SECOND} }
  - key: route
    rate_limit: { unit: second, requests_per_unit: ${REQUESTS_PER_SECOND} }
`;

interface Descriptor {
  readonly entries: readonly { readonly key: string; readonly value: string }[];
}
interface RateLimitRequest {
  readonly domain: string;
  readonly descriptors: readonly Descriptor[];
}
interface RateLimitResponse {
  readonly overallCode: number;
}

const TENANT: Descriptor = { entries: [{ key: 'tenant', value: 'hot' }] };
const ROUTE: Descriptor = { entries: [{ key: 'route', value: '/hot' }] };

/** What the client sends, and how many calls it keeps in flight. */
interface Load {
  readonly label: string;
  readonly request: RateLimitRequest;
  readonly inFlight: number;
}

const ONE_AT_1: Load = {
  label: 'tenant, 1 in flight',
  request: { domain: 'bench', descriptors: [TENANT] },
  inFlight: 1,
};
const ONE_AT_64: Load = { ...ONE_AT_1, label: 'tenant, 64 in flight', inFlight: 64 };
const TWO_AT_64: Load = {
  label: 'tenant + route, 64 in flight',
  request: { domain: 'bench', descriptors: [TENANT, ROUTE] },
  inFlight: 64,
};
const LOADS = [ONE_AT_1, ONE_AT_64, TWO_AT_64] as const;

const SENTINEL = 'sentinel-rls';
const FLOOR = 'floor';

function rateLimitService(): grpc.ServiceDefinition {
  return loadSync(PROTO, LOADER)[SERVICE] as grpc.ServiceDefinition;
}

// --- The floor's server, in its own process --------------------------------------------------------

/** One EVALSHA of the floor script per call, keyed by the first descriptor; OK, one status each. */
async function serveFloor(redisUrl: string): Promise<void> {
  const client = await connect(redisUrl);
  const sha = (await client.script('LOAD', FLOOR_SCRIPT)) as string;
  const server = new grpc.Server();
  server.addService(rateLimitService(), {
    ShouldRateLimit(
      call: grpc.ServerUnaryCall<RateLimitRequest, RateLimitResponse>,
      callback: grpc.sendUnaryData<unknown>,
    ) {
      const { descriptors } = call.request;
      const entry = descriptors[0]?.entries[0];
      client.evalsha(sha, 1, `floor:${entry?.key}:${entry?.value}`).then(
        () => callback(null, { overallCode: OK, statuses: descriptors.map(() => ({ code: OK })) }),
        (error: Error) => callback({ code: grpc.status.UNAVAILABLE, details: error.message }),
      );
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
  console.log(`floor listening ${port}`);
  const shutdown = (): void => {
    server.forceShutdown();
    client.disconnect();
    process.exit(0);
  };
  process.once('SIGTERM', shutdown);
  process.once('SIGINT', shutdown);
}

if (process.argv[1] === THIS_FILE && process.argv[2] === 'floor') {
  await serveFloor(process.argv[3] as string);
}

// --- The servers, as child processes ----------------------------------------------------------

interface Service {
  readonly name: string;
  readonly address: string;
  stop(): Promise<void>;
}

/**
 * Spawns a server and waits for the stdout line that says it listens; `ready` returns its port.
 * Its stderr is kept, the last of it shown should it exit first.
 */
async function startChild(
  name: string,
  args: readonly string[],
  options: { cwd: string; env?: NodeJS.ProcessEnv },
  ready: (line: string) => number | undefined,
): Promise<Service> {
  const child: ChildProcess = spawn(process.execPath, args, {
    ...options,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const supervised = supervise(child);
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4_000);
  });
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => {
      supervised.kill();
      reject(new Error(`${name} did not get ready in ${STARTUP_MS / 1000} s:\n${stderr}`));
    }, STARTUP_MS);
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (line) => {
      const port = ready(line);
      if (port !== undefined) {
        clearTimeout(timer);
        resolve(port);
      }
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited (${code ?? signal}) before it was ready:\n${stderr}`));
    });
  }).catch((error: unknown) => {
    supervised.kill();
    throw error;
  });
  return { name, address: `127.0.0.1:${port}`, stop: () => supervised.stop() };
}

/** `node packages/rls/dist/bin.mjs --config <file>`, from the repository's root. */
async function startSentinelRls(redisUrl: string, configFile: string): Promise<Service> {
  const grpcPort = await freePort();
  const env = {
    ...process.env,
    REDIS_URL: redisUrl,
    GRPC_PORT: String(grpcPort),
    PORT: String(await freePort()),
    LOG_LEVEL: 'warn',
  };
  return startChild(
    SENTINEL,
    ['--import', PUBLISHED, BIN, '--config', configFile],
    { cwd: ROOT, env },
    (line) => {
      const match = READY.exec(line.trim());
      return match ? Number(match[1] ?? grpcPort) : undefined;
    },
  );
}

async function startFloor(redisUrl: string): Promise<Service> {
  return startChild(
    FLOOR,
    ['--import', 'tsx', '--import', PUBLISHED, THIS_FILE, 'floor', redisUrl],
    { cwd: BENCH_DIR },
    (line) => {
      const match = FLOOR_READY.exec(line.trim());
      return match ? Number(match[1]) : undefined;
    },
  );
}

// --- The client ----------------------------------------------------------------------------------

interface Caller {
  call(request: RateLimitRequest): Promise<RateLimitResponse>;
  close(): void;
}

/** One channel to a server: its own subchannel, shared with no other contender. */
function caller(address: string, service: grpc.ServiceDefinition): Caller {
  const method = service.ShouldRateLimit as grpc.MethodDefinition<
    RateLimitRequest,
    RateLimitResponse
  >;
  const client = new grpc.Client(address, grpc.credentials.createInsecure(), {
    'grpc.use_local_subchannel_pool': 1,
  });
  return {
    call: (request) =>
      new Promise((resolve, reject) =>
        client.makeUnaryRequest(
          method.path,
          method.requestSerialize,
          method.responseDeserialize,
          request,
          { deadline: Date.now() + CALL_DEADLINE_MS },
          (error, response) => (error || !response ? reject(error) : resolve(response)),
        ),
      ),
    close: () => client.close(),
  };
}

interface Run {
  /** Calls answered OK per second. */
  readonly rate: number;
  /** The 99th percentile of an OK call's time, ms. */
  readonly p99: number;
  /** Calls that failed or were answered anything but OK. */
  readonly amiss: number;
  readonly calls: number;
}

/** `load.inFlight` calls outstanding for `seconds`; only calls answered OK count. */
async function drive(to: Caller, load: Load, seconds: number): Promise<Run> {
  const samples: number[] = [];
  let amiss = 0;
  const perSecond = await saturate(load.inFlight, seconds * 1000, async () => {
    const started = performance.now();
    try {
      const response = await to.call(load.request);
      if (response.overallCode === OK) samples.push(performance.now() - started);
      else amiss++;
    } catch {
      amiss++;
    }
  });
  const calls = samples.length + amiss;
  return {
    rate: calls ? (perSecond * samples.length) / calls : 0,
    p99: quantile(samples, 0.99),
    amiss,
    calls,
  };
}

const contenderName = (server: string, load: Load): string => `${server}, ${load.label}`;

export const rls: Suite = async (config) => {
  const seconds = config.smoke ? Math.min(config.seconds, 0.2) : config.seconds;
  const rounds = config.smoke ? 1 : config.rounds;
  const redis = await startRedis();
  const dir = mkdtempSync(join(tmpdir(), 'sentinel-bench-rls-'));
  const services: Service[] = [];
  const callers: Caller[] = [];
  try {
    const configFile = join(dir, 'bench.yaml');
    writeFileSync(configFile, CONFIG);
    // One at a time: starting them together would only make each start slower.
    services.push(await startSentinelRls(redis.url, configFile));
    services.push(await startFloor(redis.url));
    const service = rateLimitService();
    const servers = services.map((s) => ({ name: s.name, to: caller(s.address, service) }));
    callers.push(...servers.map((s) => s.to));
    // Connects the channels, loads the scripts and warms the JIT, untimed, so that round one is
    // not the cold one.
    for (const { to } of servers) await drive(to, TWO_AT_64, config.smoke ? 0.1 : 0.5);
    const runs = await alternate(
      rounds,
      servers.flatMap(({ name, to }) =>
        LOADS.map(
          (load): Contender<Run> => ({
            name: contenderName(name, load),
            run: () => drive(to, load, seconds),
          }),
        ),
      ),
    );
    return report(runs, rounds, seconds);
  } finally {
    for (const to of callers) to.close();
    await Promise.all(services.map((s) => s.stop()));
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
};

function report(runs: Map<string, Run[]>, rounds: number, seconds: number): SuiteReport {
  const of = (server: string, load: Load) => runs.get(contenderName(server, load)) ?? [];
  const rateOf = (server: string, load: Load) => median(of(server, load).map((r) => r.rate));
  const p99Of = (server: string, load: Load) => median(of(server, load).map((r) => r.p99));
  const share = (load: Load) => rateOf(SENTINEL, load) / rateOf(FLOOR, load);
  const rows = LOADS.flatMap((load) =>
    [SENTINEL, FLOOR].map((server) => [
      server,
      load.request.descriptors.length === 1 ? 'tenant' : 'tenant + route',
      String(load.inFlight),
      rate(rateOf(server, load)),
      ms(p99Of(server, load)),
      server === SENTINEL ? times(share(load)) : '',
    ]),
  );
  const ratios: Ratio[] = [
    { label: 'sentinel-rls ÷ floor, 64 in flight', value: share(ONE_AT_64), goal: FLOOR_GOAL },
    { label: 'sentinel-rls ÷ floor, 1 in flight', value: share(ONE_AT_1) },
    { label: 'sentinel-rls ÷ floor, two descriptors, 64 in flight', value: share(TWO_AT_64) },
  ];
  const tally = [SENTINEL, FLOOR].map((server) => {
    const all = LOADS.flatMap((load) => of(server, load));
    const amiss = all.reduce((n, r) => n + r.amiss, 0);
    const calls = all.reduce((n, r) => n + r.calls, 0);
    return `${server} ${amiss.toLocaleString('en')} of ${calls.toLocaleString('en')}`;
  });
  return {
    title: 'RLS: Envoy rate limit service, sentinel-rls against the one-call floor',
    method:
      `sentinel-rls as users run it (the built bin, \`node packages/rls/dist/bin.mjs --config <file>\`, as \`npx sentinel-rls\` runs it, \`REDIS_URL\` the bench's Redis, \`LOG_LEVEL=warn\`), domain \`bench\` with \`tenant\` and \`route\` each limited to ${REQUESTS_PER_SECOND.toLocaleString('en')} a second, so that every call is admitted and does the full consume; against the floor, a gRPC server (@grpc/grpc-js and @grpc/proto-loader on the package's protos) whose ShouldRateLimit sends one EVALSHA of the floor script (TIME, GET, SET PX) through ioredis and answers OK, one status per descriptor. ` +
      `Each runs in a process of its own; the bench process drives each through one grpc-js channel, as Envoy keeps one, with \`ShouldRateLimit\` for one hot tenant at 1 and at 64 calls in flight, and for the tenant and a route (two descriptors) at 64. ` +
      `Every contender runs ${seconds} s per round, taking turns over ${rounds} round${rounds === 1 ? '' : 's'} after an untimed warm-up; calls/s and p99 are medians over the rounds, and "× floor" is sentinel-rls's calls/s over the floor's under the same load, same run.`,
    columns: ['server', 'descriptors', 'in flight', 'calls/s', 'p99', '× floor'],
    rows,
    ratios,
    targets: [
      {
        goal: `sentinel-rls at 64 in flight ≥ ${FLOOR_GOAL}× the one-call floor`,
        figure: `${rate(rateOf(SENTINEL, ONE_AT_64))} calls/s against the floor's ${rate(rateOf(FLOOR, ONE_AT_64))}: ${times(share(ONE_AT_64))}`,
        met: share(ONE_AT_64) >= FLOOR_GOAL,
      },
    ],
    notes: [
      `Information: one call at a time, sentinel-rls answers ${rate(rateOf(SENTINEL, ONE_AT_1))} calls/s (p99 ${ms(p99Of(SENTINEL, ONE_AT_1))}) against the floor's ${rate(rateOf(FLOOR, ONE_AT_1))} (p99 ${ms(p99Of(FLOOR, ONE_AT_1))}): ${times(share(ONE_AT_1))}. With two descriptors at 64 in flight, ${times(share(TWO_AT_64))} the floor, which still sends one call for both.`,
      `Calls that failed or were answered anything but OK are left out of the rates and latencies: ${tally.join('; ')}.`,
      "Both servers load Sentinel from the built packages, as a user's install has them.",
    ],
  };
}
