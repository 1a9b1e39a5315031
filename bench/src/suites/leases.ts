// Quota leases over HTTP: one hot tenant on Express, Koa and Fastify, Sentinel as users write it
// with and without `quotaLeases`, against the bare app, the bare app setting the same headers by
// hand, and the one-call floor; req/s, and the Redis script calls each makes per second.

import { load } from '../http/load.ts';
import { type ServerProcess, startServer } from '../http/server-process.ts';
import type { Framework, Variant } from '../http/variants.ts';
import {
  type BenchConfig,
  inStretches,
  type Ratio,
  rate,
  type SuiteReport,
  type Target,
  times,
} from '../lib/measure.ts';
import { type BenchRedis, commandStats, SCRIPT_COMMANDS, startRedis } from '../lib/redis-server.ts';

const FRAMEWORKS = ['express', 'koa', 'fastify'] as const satisfies readonly Framework[];
const NAMES: Record<(typeof FRAMEWORKS)[number], string> = {
  express: 'Express',
  koa: 'Koa',
  fastify: 'Fastify',
};
/** With leases, of bare's throughput; with the headers by hand as the bound where it is lower. */
const BARE_GOAL = 0.9;
/** How many times fewer Redis calls a second leases make for the hot tenant. */
const CALLS_GOAL = 10;
/** Without leases, of the one-call floor's throughput. */
const FLOOR_GOAL = 0.95;
/** Each turn of a contender under load. */
const STRETCH_SECONDS = 1;

const CONTENDERS: readonly { name: string; label: string; variant: Variant }[] = [
  { name: 'bare', label: 'bare', variant: 'bare' },
  {
    name: 'bare-headers',
    label: 'bare, the RateLimit headers set by hand',
    variant: 'bare-headers',
  },
  { name: 'floor', label: 'floor: one EVALSHA', variant: 'floor' },
  { name: 'as-written', label: 'Sentinel as users write it', variant: 'sentinel-own-client' },
  { name: 'leases', label: 'the same, `quotaLeases: true`', variant: 'sentinel-leases' },
];

interface Run {
  /** Responses a second, the mean over the contender's stretches. */
  readonly rps: number;
  /** Script calls Redis ran a second, over the contender's stretches. */
  readonly callsPerSecond: number;
}

async function scriptCalls(redis: BenchRedis): Promise<number> {
  const stats = await commandStats(redis.admin);
  return SCRIPT_COMMANDS.reduce((sum, command) => sum + (stats.get(command)?.calls ?? 0), 0);
}

/**
 * Each contender warmed up once, then all taking turns in stretches of `STRETCH_SECONDS` until
 * each has had its `rounds` × `seconds`: the host's speed moves between two states for seconds at
 * a time, which rounds of seconds met unevenly (Express's leases ran 3.8k to 4.9k req/s round by
 * round, beside headers by hand at 3.7k to 4.9k).
 */
async function measure(
  framework: (typeof FRAMEWORKS)[number],
  redis: BenchRedis,
  config: BenchConfig,
): Promise<Map<string, Run>> {
  const warmUp = config.smoke ? 0.1 : Math.min(1, config.seconds / 2);
  const seconds = config.smoke ? 0.2 : config.seconds;
  const rounds = config.smoke ? 1 : config.rounds;
  const stretch = Math.min(STRETCH_SECONDS, seconds);
  const servers: [string, ServerProcess][] = [];
  try {
    for (const { name, variant } of CONTENDERS) {
      servers.push([name, await startServer(framework, variant, redis.url, 'node')]);
    }
    for (const [, server] of servers) await load(server.port, 0, warmUp, 'one');
    const calls = new Map<string, { calls: number; seconds: number }>();
    const rates = await inStretches(
      rounds * seconds * 1000,
      stretch * 1000,
      servers.map(([name, server]) => ({
        name,
        async run() {
          const before = await scriptCalls(redis);
          const started = performance.now();
          const { rps } = await load(server.port, 0, stretch, 'one');
          const spent = calls.get(name) ?? { calls: 0, seconds: 0 };
          spent.seconds += (performance.now() - started) / 1000;
          spent.calls += (await scriptCalls(redis)) - before;
          calls.set(name, spent);
          return rps;
        },
      })),
    );
    return new Map(
      servers.map(([name]) => {
        const spent = calls.get(name) ?? { calls: 0, seconds: 1 };
        return [
          name,
          { rps: rates.get(name) ?? Number.NaN, callsPerSecond: spent.calls / spent.seconds },
        ];
      }),
    );
  } finally {
    await Promise.all(servers.map(([, server]) => server.stop()));
  }
}

export async function leases(config: BenchConfig): Promise<SuiteReport> {
  const redis = await startRedis();
  const rows: string[][] = [];
  const ratios: Ratio[] = [];
  const targets: Target[] = [];
  try {
    for (const framework of FRAMEWORKS) {
      const runs = await measure(framework, redis, config);
      const rps = (name: string) => runs.get(name)?.rps ?? Number.NaN;
      const calls = (name: string) => runs.get(name)?.callsPerSecond ?? Number.NaN;
      const name = NAMES[framework];
      const bare = rps('bare');
      for (const contender of CONTENDERS) {
        const r = rps(contender.name);
        rows.push([
          name,
          contender.label,
          rate(r),
          rate(calls(contender.name)),
          (r / bare).toFixed(2),
          (r / rps('floor')).toFixed(2),
        ]);
      }
      const leased = rps('leases');
      const bound = rps('bare-headers') / bare;
      ratios.push({ label: `${name}: leases ÷ bare`, value: leased / bare, goal: BARE_GOAL });
      targets.push({
        goal: `${name}: with quota leases, one hot tenant keeps at least ${BARE_GOAL}× bare's throughput (or, where the headers alone cost more, the bare app setting them by hand)`,
        figure: `${rate(leased)} req/s, ${(leased / bare).toFixed(2)} of bare; the headers by hand keep ${bound.toFixed(2)}, leases ${times(leased / rps('bare-headers'))} of that`,
        met:
          leased / bare >= BARE_GOAL || (bound < BARE_GOAL && leased >= rps('bare-headers') * 0.98),
      });
      const fewer = calls('as-written') / calls('leases');
      ratios.push({
        label: `${name}: Redis calls/s, without ÷ with leases`,
        value: fewer,
        goal: CALLS_GOAL,
      });
      targets.push({
        goal: `${name}: quota leases cut the hot tenant's Redis calls a second at least ${CALLS_GOAL}-fold`,
        figure: `${rate(calls('as-written'))} calls/s without, ${rate(calls('leases'))} with: ${times(fewer)} fewer`,
        met: fewer >= CALLS_GOAL,
      });
      const asWritten = rps('as-written');
      ratios.push({
        label: `${name}: as written ÷ floor`,
        value: asWritten / rps('floor'),
        goal: FLOOR_GOAL,
      });
      targets.push({
        goal: `${name}: without leases, Sentinel as users write it keeps at least ${FLOOR_GOAL}× the one-call floor`,
        figure: `${rate(asWritten)} req/s against the floor's ${rate(rps('floor'))}: ${times(asWritten / rps('floor'))}`,
        met: asWritten / rps('floor') >= FLOOR_GOAL,
      });
    }
  } finally {
    await redis.stop();
  }
  return {
    title: 'Quota leases: one hot tenant over HTTP, Express, Koa and Fastify',
    method:
      'autocannon (32 keep-alive connections, one API key on every request) against each contender in a server process of its own, each framework in turn: ' +
      'the bare app; the bare app setting the `RateLimit-Policy` and `RateLimit` headers Sentinel sends by hand; the floor, one EVALSHA per request; ' +
      "Sentinel as users write it (the app's own ioredis client, `identify` by key), and the same with `quotaLeases: true`. " +
      `The limit is 10⁹ a minute, so nothing is refused. Each contender is warmed up once; then they take turns under load in stretches of ${STRETCH_SECONDS} s, in reverse order every other turn, until each has had ${config.rounds} × ${config.seconds} s, since the host's speed moves between two states for seconds at a time. req/s is the mean over a contender's stretches, and its Redis script calls a second are read from Redis (INFO commandstats: FCALL, EVALSHA and EVAL) around each stretch (a lease given back while its server waits for its turn is not counted: one call a lease at most).`,
    columns: [
      'framework',
      'contender',
      'req/s',
      'Redis calls/s',
      'share of bare',
      'share of floor',
    ],
    rows,
    ratios,
    targets,
  };
}
