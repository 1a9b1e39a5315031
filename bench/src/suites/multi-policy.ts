// Multi-policy: what a second policy adds to a decision. Sentinel decides both in one script
// call; rate-limiter-flexible needs one limiter per policy, combined by its RateLimiterUnion
// (both consumed at once) or consumed one after the other.
import { createLimiter, type Limiter } from '@sentinel/core';
import { Redis } from 'ioredis';
import { RateLimiterRedis, RateLimiterRes, RateLimiterUnion } from 'rate-limiter-flexible';
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
import { type BenchRedis, commandStats, SCRIPT_COMMANDS, startRedis } from '../lib/redis-server.ts';

const IN_FLIGHT = 256;
const KEYS = 10_000;
/** Targets: two policies take at most this many times one policy's time, one call at a time… */
const GOAL_ALONE = 1.25;
/** …and at IN_FLIGHT in flight, where Redis and Node share the cores and per-policy work shows. */
const GOAL_LOADED = 1.5;

// Limits far above what a key sees here, so every call is admitted: the suite measures what a
// second policy costs a decision, not what a refusal costs.
const MINUTE = { limit: 1_000_000, window: '1m' } as const;
const HOUR = { limit: 10_000_000, window: '1h' } as const;

const SENTINEL_ONE = 'Sentinel, one policy';
const SENTINEL_TWO = 'Sentinel, two policies';
const PEER_ONE = 'rate-limiter-flexible, one limiter';
/** What rate-limiter-flexible offers for several limits: the targets' peer. */
const PEER_TWO = 'rate-limiter-flexible, two limiters, RateLimiterUnion';
const PEER_IN_TURN = 'rate-limiter-flexible, two limiters in turn';
/** Each two-policy variant and the one-policy variant its time is set against. */
const PAIRS = [
  [SENTINEL_TWO, SENTINEL_ONE],
  [PEER_TWO, PEER_ONE],
  [PEER_IN_TURN, PEER_ONE],
] as const;

type Outcome = 'admitted' | 'refused' | 'degraded';

interface Variant {
  readonly name: string;
  decide(key: string): Promise<Outcome>;
}

interface Tally {
  calls: number;
  refused: number;
  degraded: number;
}

interface Saturated {
  /** Decisions per second that Redis made. */
  readonly rate: number;
  /** Redis CPU per decision, µs: every script call's time, over the decisions. */
  readonly cpu: number;
  /** Redis commands per decision, those the scripts call included (the scripts not counted). */
  readonly commands: number;
}

/**
 * What the clients send besides the decisions' commands: not part of a decision's cost. The
 * script commands themselves are counted apart, as SCRIPT_COMMANDS.
 */
const OVERHEAD = /^(info|ping|hello|select|quit|(client|config|script|command|function)\|.*)$/;

function sentinelVariant(name: string, limiter: Limiter): Variant {
  return {
    name,
    async decide(key) {
      const decision = await limiter.consume(key);
      return decision.degraded ? 'degraded' : decision.allowed ? 'admitted' : 'refused';
    },
  };
}

/** A refusal by one limiter, or by a RateLimiterUnion (each refusing limiter's answer by prefix). */
function refusal(error: unknown): boolean {
  if (error instanceof RateLimiterRes) return true;
  return (
    typeof error === 'object' &&
    error !== null &&
    Object.values(error).every((answer) => answer instanceof RateLimiterRes)
  );
}

function flexibleVariant(name: string, consume: (key: string) => Promise<unknown>): Variant {
  return {
    name,
    async decide(key) {
      try {
        await consume(key);
        return 'admitted';
      } catch (error) {
        if (refusal(error)) return 'refused';
        throw error;
      }
    },
  };
}

/**
 * IN_FLIGHT decisions outstanding over KEYS keys, each variant on its own key space. Only
 * decisions Redis made count: one made without it (after a timeout, or while the breaker is
 * open) is quick and would flatter the figure.
 */
function throughput(redis: BenchRedis, v: Variant, seconds: number, tally: Tally) {
  return async (): Promise<Saturated> => {
    let calls = 0;
    let degraded = 0;
    await redis.admin.config('RESETSTAT');
    const perSecond = await saturate(IN_FLIGHT, seconds * 1000, async (i) => {
      const outcome = await v.decide(`${v.name}:${i % KEYS}`);
      calls++;
      if (outcome === 'degraded') degraded++;
      else if (outcome === 'refused') tally.refused++;
    });
    let usec = 0;
    let commands = 0;
    for (const [command, stat] of await commandStats(redis.admin)) {
      if (SCRIPT_COMMANDS.includes(command)) usec += stat.calls * stat.usecPerCall;
      else if (!OVERHEAD.test(command)) commands += stat.calls;
    }
    tally.calls += calls;
    tally.degraded += degraded;
    const decided = calls - degraded;
    return {
      rate: calls ? (perSecond * decided) / calls : 0,
      cpu: usec / decided,
      commands: commands / decided,
    };
  };
}

/** Median time of one decision Redis made, with nothing else in flight, in ms. */
function latency(v: Variant, seconds: number, tally: Tally) {
  return async (): Promise<number> => {
    const samples: number[] = [];
    const until = performance.now() + seconds * 1000;
    for (let i = 0; performance.now() < until; i++) {
      const started = performance.now();
      const outcome = await v.decide(`${v.name}:${i % KEYS}`);
      const took = performance.now() - started;
      tally.calls++;
      if (outcome === 'admitted') samples.push(took);
      else tally[outcome]++;
    }
    return quantile(samples, 0.5);
  };
}

export const multiPolicy: Suite = async (config) => {
  const redis = await startRedis();
  const closers: (() => Promise<unknown>)[] = [];
  try {
    // Sentinel with its defaults: each limiter builds (and closes) its own client.
    const one = createLimiter({ redisUrl: redis.url, policies: [MINUTE] });
    closers.push(() => one.close());
    const two = createLimiter({ redisUrl: redis.url, policies: [MINUTE, HOUR] });
    closers.push(() => two.close());
    const client = new Redis(redis.url);
    closers.push(() => client.quit());
    // Distinct key prefixes: two peer limiters sharing one would count into the same key.
    const flexible = (limit: number, seconds: number, keyPrefix: string) =>
      new RateLimiterRedis({ storeClient: client, points: limit, duration: seconds, keyPrefix });
    const flexMinute = flexible(MINUTE.limit, 60, 'mp-minute');
    const flexHour = flexible(HOUR.limit, 3600, 'mp-hour');
    const union = new RateLimiterUnion(flexMinute, flexHour);
    const variants = [
      sentinelVariant(SENTINEL_ONE, one),
      sentinelVariant(SENTINEL_TWO, two),
      flexibleVariant(PEER_ONE, (key) => flexMinute.consume(key)),
      flexibleVariant(PEER_TWO, (key) => union.consume(key)),
      // As an application holding one limiter per policy may write it, stopping at a refusal.
      flexibleVariant(PEER_IN_TURN, async (key) => {
        await flexMinute.consume(key);
        await flexHour.consume(key);
      }),
    ];
    const tallies = new Map(variants.map((v) => [v.name, { calls: 0, refused: 0, degraded: 0 }]));
    const tally = (v: Variant) => tallies.get(v.name) as Tally;
    const seconds = config.smoke ? Math.min(config.seconds, 0.2) : config.seconds;
    const rounds = config.smoke ? 1 : config.rounds;
    // Connects the clients, loads the scripts and warms the JIT, untimed, so that round one is
    // not the cold one.
    if (!config.smoke) {
      for (const v of variants) await throughput(redis, v, Math.min(seconds, 0.5), tally(v))();
    }
    const saturated = await alternate(
      rounds,
      variants.map(
        (v): Contender<Saturated> => ({
          name: v.name,
          run: throughput(redis, v, seconds, tally(v)),
        }),
      ),
    );
    const p50s = await alternate(
      rounds,
      variants.map(
        (v): Contender<number> => ({ name: v.name, run: latency(v, seconds / 2, tally(v)) }),
      ),
    );
    return report(variants, saturated, p50s, tallies, rounds);
  } finally {
    for (const close of closers) await close().catch(() => {});
    await redis.stop();
  }
};

function report(
  variants: readonly Variant[],
  saturated: Map<string, Saturated[]>,
  p50s: Map<string, number[]>,
  tallies: Map<string, Tally>,
  rounds: number,
): SuiteReport {
  const rateOf = (name: string) => median((saturated.get(name) ?? []).map((s) => s.rate));
  const cpuOf = (name: string) => median((saturated.get(name) ?? []).map((s) => s.cpu));
  const commandsOf = (name: string) => median((saturated.get(name) ?? []).map((s) => s.commands));
  const p50Of = (name: string) => median(p50s.get(name) ?? []);
  // Time per decision is 1 / rate, so two's time over one's is one's rate over two's.
  const timeRatio = (two: string, one: string) => rateOf(one) / rateOf(two);
  const baseOf = new Map<string, string>(PAIRS);
  const usec = (value: number) => (Number.isFinite(value) ? `${value.toFixed(1)} µs` : 'n/a');
  const rows = variants.map((v) => {
    const base = baseOf.get(v.name);
    return [
      v.name,
      rate(rateOf(v.name)),
      usec(1e6 / rateOf(v.name)),
      base ? times(timeRatio(v.name, base)) : '',
      usec(cpuOf(v.name)),
      commandsOf(v.name).toFixed(1),
      ms(p50Of(v.name)),
      base ? times(p50Of(v.name) / p50Of(base)) : '',
    ];
  });
  const busy = (name: string) => `${Math.round((cpuOf(name) * rateOf(name)) / 1e4)}%`;
  // Each policy reads and writes its own key: twice one policy's commands, and no more, unless a
  // key is read twice. (The clock read is one per batch, nearly none per decision.)
  const rereads = commandsOf(SENTINEL_TWO) > 2 * commandsOf(SENTINEL_ONE) + 0.5;
  const sentinel = timeRatio(SENTINEL_TWO, SENTINEL_ONE);
  const peer = timeRatio(PEER_TWO, PEER_ONE);
  const peerInTurn = timeRatio(PEER_IN_TURN, PEER_ONE);
  // One call at a time, a decision's time is its round trip: rate-limiter-flexible's union sends
  // two commands at once, its limiters in turn pay two round trips.
  const alone = p50Of(SENTINEL_TWO) / p50Of(SENTINEL_ONE);
  const peerAlone = p50Of(PEER_TWO) / p50Of(PEER_ONE);
  const peerInTurnAlone = p50Of(PEER_IN_TURN) / p50Of(PEER_ONE);
  const ratios: Ratio[] = [
    { label: 'two policies ÷ one, decisions/s', value: 1 / sentinel, goal: 1 / GOAL_LOADED },
    { label: 'two policies ÷ one, one call at a time', value: 1 / alone, goal: 1 / GOAL_ALONE },
    {
      label: "second policy's cost: rate-limiter-flexible's ÷ Sentinel's, decisions/s",
      value: peer / sentinel,
      goal: 1,
    },
    {
      label: "second policy's cost: rate-limiter-flexible's ÷ Sentinel's, one at a time",
      value: peerAlone / alone,
      goal: 1,
    },
    {
      label: 'two policies ÷ rate-limiter-flexible two',
      value: rateOf(SENTINEL_TWO) / rateOf(PEER_TWO),
    },
  ];
  const peerFigure = (union: number, inTurn: number) =>
    `${times(union)} (two limiters in turn: ${times(inTurn)})`;
  const notes = [
    `Limits of ${MINUTE.limit.toLocaleString('en')} per minute and ${HOUR.limit.toLocaleString('en')} per hour (Sentinel's default token bucket; rate-limiter-flexible's fixed windows), far above what a key sees, so every call is admitted.`,
    `Redis CPU per decision: Sentinel's second policy takes it from ${usec(cpuOf(SENTINEL_ONE))} to ${usec(cpuOf(SENTINEL_TWO))} (${times(cpuOf(SENTINEL_TWO) / cpuOf(SENTINEL_ONE))}), rate-limiter-flexible's second limiter from ${usec(cpuOf(PEER_ONE))} to ${usec(cpuOf(PEER_TWO))} (${times(cpuOf(PEER_TWO) / cpuOf(PEER_ONE))}). At ${IN_FLIGHT} in flight Redis was busy ${busy(SENTINEL_TWO)} of the time for Sentinel's two policies and ${busy(SENTINEL_ONE)} for one; the rest of a decision's time is Node (limiter and client), which shares the cores with Redis.`,
    rereads
      ? `Sentinel's two-policy call runs ${commandsOf(SENTINEL_TWO).toFixed(1)} Redis commands against ${commandsOf(SENTINEL_ONE).toFixed(1)} for one policy: more than twice, so some key is read again (lua/prelude/decision.lua \`decide\` should read each once).`
      : `Sentinel's two-policy call runs ${commandsOf(SENTINEL_TWO).toFixed(1)} Redis commands against ${commandsOf(SENTINEL_ONE).toFixed(1)} for one policy: each policy's key is read once, and written only when every policy admits, since the call decides them all-or-nothing. Batching already shares the script call, the clock read and the round trip among the decisions, so what is left per decision is per policy (its GET, its SET, its arithmetic, its arguments and reply), and a second policy costs Redis about as much as the first. What would move the ratio: one key per identity holding every policy's state, so that a decision costs one GET and one SET whatever its number of policies.`,
    `All four targets were met when they were set; they are regression targets. One call at a time a decision's time is mostly its round trip, which the second policy shares; at ${IN_FLIGHT} in flight Redis and Node share the cores, so the second policy's own Redis work shows, hence the looser bound there.`,
    `Decisions made without Redis (after a timeout, under the default 50 ms, or while the breaker was open) are left out of the rates and latencies; refused and store-less decisions out of all made: ${variants
      .map((v) => {
        const { calls, refused, degraded } = tallies.get(v.name) as Tally;
        return `${v.name} ${refused} refused and ${degraded} without Redis of ${calls.toLocaleString('en')}`;
      })
      .join('; ')}.`,
  ];
  return {
    title: 'Multi-policy',
    method: `Two policies against one, on the bench's Redis, from one Node process: decisions per second with ${IN_FLIGHT} in flight over ${KEYS / 1000}k keys, with Redis CPU per decision (script time from \`INFO commandstats\`), and the median time of one decision with nothing else in flight. Sentinel (\`createLimiter\` with \`redisUrl\`, defaults otherwise) decides both policies in one script call; rate-limiter-flexible's RateLimiterRedis needs a limiter per policy, on one ioredis client: combined by its \`RateLimiterUnion\`, the way its documentation gives for several limits, which consumes both at once (the targets' peer), and awaited one after the other, which stops at a refusal. The variants alternate over ${rounds} round${rounds === 1 ? '' : 's'}, medians reported; "× one" is a two-policy variant's figure over the same limiter's with one policy.`,
    columns: [
      'Variant',
      `Decisions/s (${IN_FLIGHT} in flight)`,
      'Time per decision',
      'Time × one',
      'Redis CPU per decision',
      'Redis commands per decision',
      'p50, one in flight',
      'p50 × one',
    ],
    rows,
    ratios,
    targets: [
      {
        goal: `two policies cost at most ${GOAL_ALONE}× one policy's time, one call at a time (median)`,
        figure: times(alone),
        met: alone <= GOAL_ALONE,
      },
      {
        goal: `two policies cost at most ${GOAL_LOADED}× one policy's time at ${IN_FLIGHT} in flight (time per decision, 1 ÷ decisions/s)`,
        figure: times(sentinel),
        met: sentinel <= GOAL_LOADED,
      },
      {
        goal: "one call at a time, below rate-limiter-flexible's ratio (RateLimiterUnion of two limiters ÷ one limiter), same run",
        figure: `${times(alone)} against ${peerFigure(peerAlone, peerInTurnAlone)}`,
        met: alone < peerAlone,
      },
      {
        goal: `at ${IN_FLIGHT} in flight, below rate-limiter-flexible's ratio (the same), same run`,
        figure: `${times(sentinel)} against ${peerFigure(peer, peerInTurn)}`,
        met: sentinel < peer,
      },
    ],
    notes,
  };
}
