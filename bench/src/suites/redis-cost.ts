// Redis cost per decision: each script's saturated rate (FCALL for Sentinel's, as it sends them on
// Redis 7; EVALSHA for the rest) and Redis CPU per call, next to the floor any server-clock
// limiter pays, the original design's script and the peers' scripts. Information: the targets on
// a script's cost are Redis CPU per decision as a Node process spends it (node-decisions.ts).
import {
  alternate,
  median,
  type Ratio,
  rate,
  type Suite,
  type SuiteReport,
  times,
} from '../lib/measure.ts';
import { type BenchRedis, commandStats, startRedis } from '../lib/redis-server.ts';
import { LOAD, requireRedisBenchmark, serverRate } from '../redis-cost/redis-benchmark.ts';
import { loadContenders, POLICY, type ScriptContender } from '../redis-cost/script-contenders.ts';

interface RunFigures {
  readonly rate: number;
  /** Redis CPU per call, µs, from INFO commandstats. */
  readonly usec: number;
}

/**
 * The first goals, as a share of the floor's rate: no longer targets, since a script
 * called alone by redis-benchmark is not how Sentinel calls Redis; quoted beside the figures.
 */
const FORMER_GOALS: Readonly<Record<string, number>> = {
  'token-bucket': 0.9,
  gcra: 0.9,
  'fixed-window': 1.4,
};

const SMOKE_REQUESTS = 2_000;
const CALIBRATION_REQUESTS = 50_000;

async function measure(redis: BenchRedis, contender: ScriptContender, requests: number) {
  await redis.admin.config('RESETSTAT');
  const perSecond = await serverRate(redis.port, requests, contender.command);
  const stats = await commandStats(redis.admin);
  return { rate: perSecond, usec: stats.get(contender.stat)?.usecPerCall ?? Number.NaN };
}

/**
 * redis-benchmark stops after a count, not a time: one short pass per contender (which also
 * creates its keys, so every timed round finds them warm) sizes its count to `seconds`.
 */
async function requestCounts(
  redis: BenchRedis,
  contenders: readonly ScriptContender[],
  smoke: boolean,
  seconds: number,
): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const contender of contenders) {
    if (smoke) {
      counts.set(contender.name, SMOKE_REQUESTS);
      continue;
    }
    const { rate: perSecond } = await measure(redis, contender, CALIBRATION_REQUESTS);
    counts.set(contender.name, Math.max(CALIBRATION_REQUESTS, Math.round(perSecond * seconds)));
  }
  return counts;
}

export const redisCost: Suite = async (config) => {
  requireRedisBenchmark();
  const redis = await startRedis();
  try {
    const contenders = await loadContenders(redis.admin);
    const counts = await requestCounts(redis, contenders, config.smoke, config.seconds);
    const rounds = config.smoke ? 1 : config.rounds;
    const figures = await alternate(
      rounds,
      contenders.map((contender) => ({
        name: contender.name,
        run: () => measure(redis, contender, counts.get(contender.name) as number),
      })),
    );
    // Calls per key over the whole suite, calibration included: it must stay under the limit
    // for the scripts to take their admitting path.
    const callsPerKey = Math.max(
      ...contenders.map(
        (c) =>
          ((counts.get(c.name) as number) * rounds + (config.smoke ? 0 : CALIBRATION_REQUESTS)) /
          LOAD.keys,
      ),
    );
    return report(contenders, figures, rounds, callsPerKey);
  } finally {
    await redis.stop();
  }
};

function report(
  contenders: readonly ScriptContender[],
  figures: Map<string, RunFigures[]>,
  rounds: number,
  callsPerKey: number,
): SuiteReport {
  const of = (name: string) => figures.get(name) ?? [];
  const rateOf = (name: string) => median(of(name).map((f) => f.rate));
  const usecOf = (name: string) => median(of(name).map((f) => f.usec));
  const floorRate = rateOf('floor');
  const floorUsec = usecOf('floor');
  const usec = (value: number) => (Number.isFinite(value) ? `${value.toFixed(2)} µs` : 'n/a');

  const rows = contenders.map((c) => {
    const rates = of(c.name).map((f) => f.rate);
    return [
      c.kind.startsWith('sentinel') ? `Sentinel ${c.name}` : c.name,
      rate(rateOf(c.name)),
      `${rate(Math.min(...rates))}–${rate(Math.max(...rates))}`,
      times(rateOf(c.name) / floorRate),
      usec(usecOf(c.name)),
      times(usecOf(c.name) / floorUsec),
    ];
  });

  const sentinel = contenders.filter((c) => c.kind === 'sentinel');
  // Without a goal: the chart draws no target mark on information.
  const ratios: Ratio[] = sentinel.map((c) => ({
    label: `${c.name} ÷ floor`,
    value: rateOf(c.name) / floorRate,
  }));
  const former = Object.entries(FORMER_GOALS)
    .map(([name, goal]) => `${name} ${times(rateOf(name) / floorRate)} (goal ${goal}×)`)
    .join(', ');

  const withTime = rateOf('original design with TIME') / floorRate;
  const clientTime = rateOf('original design (client time)') / floorRate;
  const cheapest = [...sentinel].sort((a, b) => usecOf(a.name) - usecOf(b.name));
  const minimal = rateOf('minimal token bucket');
  const byScript = rateOf('token-bucket by EVALSHA');
  const notes = [
    `The issue's first goals for this figure, a share of the floor's rate, kept as information: ${former}.`,
    `Sentinel runs its code as a function library on Redis 7 and later, by \`FCALL\`: its token bucket made ${times(rateOf('token-bucket') / byScript)} the rate of the same code sent as a script by \`EVALSHA\` (${usec(usecOf('token-bucket'))} against ${usec(usecOf('token-bucket by EVALSHA'))} of Redis CPU per call), which a script pays for defining its functions on every call. Sentinel sends \`EVALSHA\` where functions are missing or denied.`,
    `A minimal token bucket on Redis's clock that answers what rate-limit headers need (allowed, remaining, reset, retry) reaches ${times(minimal / floorRate)} the floor, and Sentinel's token-bucket ${times(rateOf('token-bucket') / minimal)} of that minimal script: the rest of Sentinel's cost is its generality (batches, several policies, modes, penalty boxes, large quotas) and the expiry that keeps late calls from counting.`,
    `The original design's script reaches ${times(clientTime)} the floor on the gateway's clock and ${times(withTime)} with \`TIME\` (the issue measured about 0.6×).`,
    `Redis CPU per Sentinel decision runs from ${usec(usecOf(cheapest[0]?.name ?? ''))} (${cheapest[0]?.name}) to ${usec(usecOf(cheapest.at(-1)?.name ?? ''))} (${cheapest.at(-1)?.name}), against ${usec(floorUsec)} for the floor; the rates follow the CPU, since at saturation Redis's one thread is the limit.`,
    `Policy ${POLICY.limit} per ${POLICY.windowMs / 1000} s for every limiter: the busiest contender sent about ${Math.round(callsPerKey)} calls per key over the whole suite, ${callsPerKey < POLICY.limit / 2 ? 'far below the limit, so the scripts took their admitting (writing) path' : 'close to the limit, so some calls may have been refused, which skips the write'}.`,
    `redis-benchmark and Redis share the machine's cores: the cheapest commands (return 1, bare INCR) may be held back by the load generator rather than by Redis, which only narrows their lead.`,
  ];
  return {
    title: 'Redis cost per decision',
    method: `Server-side rate of each script at saturation, measured by \`redis-benchmark\` against the bench's own redis-server: ${LOAD.clients} clients, pipelining ${LOAD.pipeline} deep, over ${LOAD.keys / 1000}k random keys (\`-r ${LOAD.keys}\`). Sentinel's code runs by \`FCALL\` of its function library (\`FUNCTION LOAD\`), as Sentinel sends it on Redis 7, and its token bucket also by \`EVALSHA\`; every other script by \`EVALSHA\`, loaded with \`SCRIPT LOAD\`. Sentinel's code runs on the Redis clock with cost 1 and one policy; the floor calls \`TIME\`, GETs one key and SETs it with \`PX\`. Contenders alternate over ${rounds} round${rounds === 1 ? '' : 's'}, each sized to about the configured seconds; the table gives each one's median rate, its range over the rounds, and its Redis CPU per call (\`usec_per_call\` from \`INFO commandstats\` after \`CONFIG RESETSTAT\`). The suite sets no target: its rates are kept as information; the targets are Redis CPU per decision, at 256 and at 1 in flight, in the decisions-per-second suite, where Redis serves Sentinel as it does for users.`,
    columns: [
      'Script',
      'Calls/s (median)',
      'Range',
      '÷ floor',
      'Redis CPU per call',
      'CPU ÷ floor',
    ],
    rows,
    ratios,
    targets: [],
    notes,
  };
}
