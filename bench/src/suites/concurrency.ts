// Concurrency: what a concurrency policy beside a rate policy costs a request. Its consume takes
// a slot in the same script call as the rate policy's; its release, once the response is done,
// is a second call. An adapter fires the release from the response's 'close' and nobody awaits
// it, so the response's time is the consume's; awaited inline, it would be both calls'.
import { createLimiter, type Decision, type Limiter, type LimiterOptions } from '@sentinel/core';
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

// Far above what a key sees here, so every call is admitted: the suite measures what holding
// and giving back a slot costs, not what a refusal costs.
const MINUTE = { limit: 1_000_000, window: '1m' } as const;
const SLOTS = { concurrency: 10_000 } as const;

const ONE = 'one rate policy';
const AWAITED = 'rate + concurrency, release awaited';
const FIRED = 'rate + concurrency, release not awaited';
const HELD = 'rate + concurrency, never released';
const RELEASE = 'release alone';

/** A request as a variant makes it: the consume (the response), then what follows it. */
interface Variant {
  readonly name: string;
  readonly limiter: Limiter;
  /** What follows the consume: nothing, a release awaited, or a release fired. */
  readonly after: 'nothing' | 'await' | 'fire';
}

interface Tally {
  requests: number;
  refused: number;
  degraded: number;
  /** Releases that resolved false (the slots were not held) or failed. */
  unreleased: number;
  /** Releases fired and not awaited yet. */
  readonly pending: Set<Promise<unknown>>;
}

interface Saturated {
  /** Requests Redis admitted per second, the time to await the releases still out included. */
  readonly rate: number;
  /** redis-server's CPU per request, µs (INFO cpu: user and system). */
  readonly redisCpu: number;
  /** Node's CPU per request, µs (process.cpuUsage). */
  readonly nodeCpu: number;
  /** Script calls per request (FCALL, EVALSHA, EVAL): a batch of requests shares one. */
  readonly scriptCalls: number;
  /** The commands the scripts ran, per request, by name (INFO commandstats). */
  readonly commands: ReadonlyMap<string, number>;
}

/**
 * What the clients send besides the requests' commands: not part of a request's cost. The
 * script commands themselves are counted apart, as SCRIPT_COMMANDS.
 */
const OVERHEAD = /^(info|ping|hello|select|quit|(client|config|script|command|function)\|.*)$/;

function newTally(): Tally {
  return { requests: 0, refused: 0, degraded: 0, unreleased: 0, pending: new Set() };
}

/** Gives the decision's slots back; a false or a failure is counted, never thrown. */
async function giveBack(limiter: Limiter, decision: Decision, tally: Tally): Promise<void> {
  try {
    if (!(await limiter.release(decision))) tally.unreleased++;
  } catch {
    tally.unreleased++;
  }
}

/**
 * One request: the consume (the response's part), then what the variant does with its slot.
 * Resolves whether Redis admitted it.
 */
async function request(v: Variant, key: string, tally: Tally): Promise<boolean> {
  const decision = await v.limiter.consume(key);
  tally.requests++;
  if (decision.degraded) {
    tally.degraded++;
    return false;
  }
  if (!decision.allowed) {
    tally.refused++;
    return false;
  }
  if (v.after === 'await') await giveBack(v.limiter, decision, tally);
  else if (v.after === 'fire') {
    const given = giveBack(v.limiter, decision, tally);
    tally.pending.add(given);
    void given.finally(() => tally.pending.delete(given));
  }
  return true;
}

async function drain(tally: Tally): Promise<void> {
  while (tally.pending.size) await Promise.all(tally.pending);
}

async function redisCpuSeconds(redis: BenchRedis): Promise<number> {
  const info = await redis.admin.info('cpu');
  const field = (name: string): number => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1]);
  return field('used_cpu_sys') + field('used_cpu_user');
}

/**
 * IN_FLIGHT requests outstanding over KEYS keys, each variant on its own key space. The releases
 * still in flight when the time is up are awaited, and their time counted, so that a variant
 * that does not await them is not credited with work it left undone. Only requests Redis
 * admitted count.
 */
function throughput(redis: BenchRedis, v: Variant, seconds: number, tally: Tally) {
  return async (): Promise<Saturated> => {
    let admitted = 0;
    await redis.admin.config('RESETSTAT');
    const redisBefore = await redisCpuSeconds(redis);
    const nodeBefore = process.cpuUsage();
    const started = performance.now();
    await saturate(IN_FLIGHT, seconds * 1000, async (i) => {
      if (await request(v, `${v.name}:${i % KEYS}`, tally)) admitted++;
    });
    await drain(tally);
    const elapsed = (performance.now() - started) / 1000;
    const node = process.cpuUsage(nodeBefore);
    const redisCpu = (await redisCpuSeconds(redis)) - redisBefore;
    let scripts = 0;
    const commands = new Map<string, number>();
    for (const [command, stat] of await commandStats(redis.admin)) {
      if (SCRIPT_COMMANDS.includes(command)) scripts += stat.calls;
      else if (!OVERHEAD.test(command)) commands.set(command, stat.calls / admitted);
    }
    return {
      rate: admitted / elapsed,
      redisCpu: (redisCpu * 1e6) / admitted,
      nodeCpu: (node.user + node.system) / admitted,
      scriptCalls: scripts / admitted,
      commands,
    };
  };
}

/**
 * Median time of one request Redis admitted, with nothing else in flight, in ms: the consume,
 * and the release when it is awaited. A fired release is still in flight when the next request
 * starts, as it is in a server, and shares its round trip or goes just before it.
 */
function latency(v: Variant, seconds: number, tally: Tally) {
  return async (): Promise<number> => {
    const samples: number[] = [];
    const until = performance.now() + seconds * 1000;
    for (let i = 0; performance.now() < until; i++) {
      const started = performance.now();
      const admitted = await request(v, `${v.name}:${i % KEYS}`, tally);
      const took = performance.now() - started;
      if (admitted) samples.push(took);
    }
    await drain(tally);
    return quantile(samples, 0.5);
  };
}

/** Median time of one release, with nothing else in flight, in ms; its consume untimed. */
function releaseLatency(limiter: Limiter, seconds: number, tally: Tally) {
  return async (): Promise<number> => {
    const samples: number[] = [];
    const until = performance.now() + seconds * 1000;
    for (let i = 0; performance.now() < until; i++) {
      const decision = await limiter.consume(`${RELEASE}:${i % KEYS}`);
      tally.requests++;
      if (decision.degraded) tally.degraded++;
      else if (!decision.allowed) tally.refused++;
      else {
        const started = performance.now();
        const held = await limiter.release(decision).catch(() => false);
        const took = performance.now() - started;
        if (held) samples.push(took);
        else tally.unreleased++;
      }
    }
    return quantile(samples, 0.5);
  };
}

export const concurrency: Suite = async (config) => {
  const redis = await startRedis();
  const limiters: Limiter[] = [];
  // Sentinel with its defaults, one limiter (and client) per variant, each on its own keys.
  const limiter = (policies: LimiterOptions['policies']) => {
    const made = createLimiter({ redisUrl: redis.url, policies });
    limiters.push(made);
    return made;
  };
  try {
    const variants: Variant[] = [
      { name: ONE, limiter: limiter([MINUTE]), after: 'nothing' },
      { name: AWAITED, limiter: limiter([MINUTE, SLOTS]), after: 'await' },
      { name: FIRED, limiter: limiter([MINUTE, SLOTS]), after: 'fire' },
      // The consume's share of the cost alone: its slots lapse with their lease (a minute).
      { name: HELD, limiter: limiter([MINUTE, SLOTS]), after: 'nothing' },
    ];
    const releaser = limiter([MINUTE, SLOTS]);
    const tallies = new Map([...variants.map((v) => v.name), RELEASE].map((n) => [n, newTally()]));
    const tally = (name: string) => tallies.get(name) as Tally;
    const seconds = config.smoke ? Math.min(config.seconds, 0.2) : config.seconds;
    const rounds = config.smoke ? 1 : config.rounds;
    // Connects the clients, loads the scripts and warms the JIT, untimed, so that round one is
    // not the cold one; the warm-up's requests are not tallied.
    if (!config.smoke) {
      for (const v of variants) await throughput(redis, v, Math.min(seconds, 0.5), newTally())();
      await releaseLatency(releaser, Math.min(seconds, 0.5) / 2, newTally())();
    }
    const saturated = await alternate(
      rounds,
      variants.map(
        (v): Contender<Saturated> => ({
          name: v.name,
          run: throughput(redis, v, seconds, tally(v.name)),
        }),
      ),
    );
    const p50s = await alternate(rounds, [
      ...variants.map(
        (v): Contender<number> => ({ name: v.name, run: latency(v, seconds / 2, tally(v.name)) }),
      ),
      { name: RELEASE, run: releaseLatency(releaser, seconds / 2, tally(RELEASE)) },
    ]);
    return report(saturated, p50s, tallies, rounds);
  } finally {
    for (const made of limiters) await made.close().catch(() => {});
    await redis.stop();
  }
};

function report(
  saturated: Map<string, Saturated[]>,
  p50s: Map<string, number[]>,
  tallies: Map<string, Tally>,
  rounds: number,
): SuiteReport {
  const of = (name: string, pick: (s: Saturated) => number) =>
    median((saturated.get(name) ?? []).map(pick));
  const rateOf = (name: string) => of(name, (s) => s.rate);
  const timeOf = (name: string) => 1e6 / rateOf(name);
  const p50Of = (name: string) => median(p50s.get(name) ?? []);
  const usec = (value: number) => (Number.isFinite(value) ? `${value.toFixed(1)} µs` : 'n/a');
  /** Per request, by command, the median over the rounds. */
  const byCommand = (name: string) => {
    const runs = saturated.get(name) ?? [];
    const names = new Set(runs.flatMap((s) => [...s.commands.keys()]));
    return new Map(
      [...names].map((command) => [command, median(runs.map((s) => s.commands.get(command) ?? 0))]),
    );
  };
  const commandsOf = (name: string) => [...byCommand(name).values()].reduce((a, b) => a + b, 0);
  const listCommands = (name: string) =>
    [...byCommand(name)]
      .filter(([, n]) => n >= 0.05)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([command, n]) => `${command.toUpperCase()} ${n.toFixed(1)}`)
      .join(', ');
  const loaded = [ONE, AWAITED, FIRED, HELD].map((name) => [
    name,
    rate(rateOf(name)),
    usec(timeOf(name)),
    name === ONE ? '' : times(timeOf(name) / timeOf(ONE)),
    usec(of(name, (s) => s.redisCpu)),
    usec(of(name, (s) => s.nodeCpu)),
    of(name, (s) => s.scriptCalls).toFixed(2),
    commandsOf(name).toFixed(1),
    ms(p50Of(name)),
    name === ONE ? '' : times(p50Of(name) / p50Of(ONE)),
  ]);
  const rows = [
    ...loaded,
    [RELEASE, '', '', '', '', '', '', '', ms(p50Of(RELEASE)), times(p50Of(RELEASE) / p50Of(ONE))],
  ];
  // A release's share at IN_FLIGHT: the request that releases over the one whose slot lapses.
  const releaseTime = timeOf(AWAITED) - timeOf(HELD);
  const releaseRedis = of(AWAITED, (s) => s.redisCpu) - of(HELD, (s) => s.redisCpu);
  const releaseNode = of(AWAITED, (s) => s.nodeCpu) - of(HELD, (s) => s.nodeCpu);
  const ratios: Ratio[] = [
    {
      label: 'rate + concurrency ÷ one rate policy, release awaited, req/s',
      value: rateOf(AWAITED) / rateOf(ONE),
    },
    {
      label: 'rate + concurrency ÷ one rate policy, release not awaited, req/s',
      value: rateOf(FIRED) / rateOf(ONE),
    },
    {
      label: 'rate + concurrency ÷ one rate policy, release awaited, one at a time',
      value: p50Of(ONE) / p50Of(AWAITED),
    },
    {
      label: 'rate + concurrency ÷ one rate policy, release not awaited, one at a time',
      value: p50Of(ONE) / p50Of(FIRED),
    },
  ];
  const sum = (pick: (t: Tally) => number) =>
    [...tallies.values()].reduce((n, t) => n + pick(t), 0);
  const requests = sum((t) => t.requests);
  const amiss = sum((t) => t.refused + t.degraded + t.unreleased);
  const notes = [
    `A limit of ${MINUTE.limit.toLocaleString('en')} per minute (Sentinel's default token bucket) and ${SLOTS.concurrency.toLocaleString('en')} slots per key (the most a policy may have) with the default lease of a minute, far above what a key sees, so every call is admitted and every release finds its slot.`,
    `The cost of a release: one at a time, ${ms(p50Of(RELEASE))}, a round trip and a script call as a consume is (${times(p50Of(RELEASE) / p50Of(ONE))} one rate policy's consume). At ${IN_FLIGHT} in flight, the request that releases over the one whose slot lapses: ${usec(releaseTime)} of time, ${usec(releaseRedis)} of Redis CPU and ${usec(releaseNode)} of Node CPU per request. Releases share the script calls of the consumes sent in the same tick, as decisions share them with each other, so a release adds commands to a script call rather than a call.`,
    `Not awaited, as the adapters release it (from the response's 'close'), the release is off the response's path: one request at a time, back to back, the response takes ${ms(p50Of(FIRED))} against ${ms(p50Of(AWAITED))} with the release awaited and ${ms(p50Of(ONE))} for one rate policy; what it has over one rate policy is the concurrency policy's work in the consume (never released: ${ms(p50Of(HELD))}) and the previous request's release, sent just before it. Its work is still done: at ${IN_FLIGHT} in flight, where Node and Redis are busy, ${rate(rateOf(FIRED))} requests/s against ${rate(rateOf(AWAITED))} awaited. The releases still in flight when a round's time is up are awaited within it.`,
    `Redis commands per request (the scripts' own calls): one rate policy ${listCommands(ONE)}; rate + concurrency, release awaited, ${listCommands(AWAITED)}; never released, ${listCommands(HELD)}. "Never released" is the consume's share alone: its sorted sets keep every slot taken in the last minute, the lease, where the others' hold only those in flight.`,
    `Refused, decided without Redis (after a timeout, or while the breaker was open) and releases that did not find their slots are left out of the rates and latencies: ${variantsTally(tallies)}.`,
  ];
  return {
    title: 'Concurrency',
    method: `A request under a rate policy and a concurrency policy against one under the rate policy alone, on the bench's Redis, from one Node process: requests per second with ${IN_FLIGHT} in flight over ${KEYS / 1000}k keys, with Redis CPU (\`INFO cpu\`), Node CPU, script calls and Redis commands (\`INFO commandstats\`) per request, and the median time of one request with nothing else in flight. Sentinel (\`createLimiter\` with \`redisUrl\`, defaults otherwise) takes the slot in the consume's script call and gives it back with \`limiter.release(decision)\`, one more: awaited before the request counts as done, and fired without awaiting, the response being the consume; "release alone" times the release by itself, its consume untimed. The variants alternate over ${rounds} round${rounds === 1 ? '' : 's'}, medians reported; "× one" is a variant's figure over one rate policy's, same run. Information: no target but a check that nothing was refused or lost.`,
    columns: [
      'Variant',
      `Requests/s (${IN_FLIGHT} in flight)`,
      'Time per request',
      'Time × one',
      'Redis CPU per request',
      'Node CPU per request',
      'Script calls per request',
      'Redis commands per request',
      'p50, one in flight',
      'p50 × one',
    ],
    rows,
    ratios,
    targets: [
      {
        goal: 'every request admitted by Redis and every release finding its slot (none refused, degraded, failed or lapsed)',
        figure: `${amiss} amiss of ${requests.toLocaleString('en')}`,
        met: amiss === 0 && requests > 0,
      },
    ],
    notes,
  };
}

function variantsTally(tallies: Map<string, Tally>): string {
  return [...tallies]
    .map(
      ([name, t]) =>
        `${name} ${t.refused} refused, ${t.degraded} without Redis and ${t.unreleased} not released of ${t.requests.toLocaleString('en')}`,
    )
    .join('; ');
}
