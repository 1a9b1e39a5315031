// Decisions per second from one Node process on Redis: each of Sentinel's algorithms, with and
// without auto-pipelining, against the peers' Redis stores, the reference script and a bare INCR;
// and Redis CPU per decision, the script-cost targets, at 256 in flight and at 1.

import { once } from 'node:events';
import {
  ALGORITHMS,
  type Algorithm,
  createLimiter,
  createRedisClient,
  LIMITER_CLIENT_OPTIONS,
  type Limiter,
} from '@sentinel/core';
import type { Options as ExpressRateLimitOptions } from 'express-rate-limit';
import { Redis } from 'ioredis';
import { RedisStore as RateLimitRedisStore, type RedisReply } from 'rate-limit-redis';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { createClient } from 'redis';
import {
  alternate,
  type BenchConfig,
  type Contender,
  median,
  type Ratio,
  rate,
  type SuiteReport,
  saturate,
  type Target,
  times,
} from '../lib/measure.ts';
import { type BenchRedis, commandStats, SCRIPT_COMMANDS, startRedis } from '../lib/redis-server.ts';
import { FLOOR_SCRIPT, REFERENCE_SCRIPT } from '../reference-script.ts';

const IN_FLIGHT = 256;
/** One decision at a time, each awaited before the next: where Redis's per-call work weighs most. */
const SEQUENTIAL = 1;
const KEYS = 10_000;
// Large enough that every call is admitted for the whole run, and within the sliding window
// log's bound of 10,000: 10k keys share the load, so each key sees a few hundred calls at most.
const LIMIT = 10_000;
const WINDOW_S = 3_600;

const us = (value: number): string => `${value.toFixed(1)} µs`;

/** One contender's round: its rate, and the CPU each side spent per second of it. */
interface RoundFigures {
  /** Admitted decisions per second: those Redis made. A degraded answer is not counted. */
  readonly perSecond: number;
  /** Calls completed per second, admitted or not. */
  readonly callsPerSecond: number;
  /** Seconds the round ran. */
  readonly elapsed: number;
  /** Calls not admitted: refused, degraded or failed. */
  readonly notAdmitted: number;
  /** Node's CPU, in cores (1 = one core busy). */
  readonly nodeCpu: number;
  /** redis-server's CPU, in cores. */
  readonly redisCpu: number;
  /** Of Redis's CPU, µs in the contender's top-level script calls (INFO commandstats). */
  readonly scriptUsec: number;
  /** The commands Redis ran, by name, scripts' own calls included (INFO commandstats). */
  readonly commands: ReadonlyMap<string, number>;
}

/** A contender's decision: true when the call was admitted by a store that answered. */
type Decide = (key: string) => Promise<boolean>;

interface Entrant {
  readonly name: string;
  readonly decide: Decide;
  readonly close: () => Promise<void>;
}

async function redisCpuSeconds(redis: BenchRedis): Promise<number> {
  const info = await redis.admin.info('cpu');
  const field = (name: string): number => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1]);
  return field('used_cpu_sys') + field('used_cpu_user');
}

function runner(
  redis: BenchRedis,
  entrant: Entrant,
  ms: number,
  tag: string,
  inFlight: number,
): Contender<RoundFigures> {
  return {
    name: entrant.name,
    async run() {
      let notAdmitted = 0;
      await redis.admin.config('RESETSTAT');
      const redisBefore = await redisCpuSeconds(redis);
      const nodeBefore = process.cpuUsage();
      const started = performance.now();
      const callsPerSecond = await saturate(inFlight, ms, async (i) => {
        if (!(await entrant.decide(`${tag}:${i % KEYS}`))) notAdmitted++;
      });
      const elapsed = (performance.now() - started) / 1000;
      const perSecond = callsPerSecond - notAdmitted / elapsed;
      const node = process.cpuUsage(nodeBefore);
      const redisCpu = ((await redisCpuSeconds(redis)) - redisBefore) / elapsed;
      const stats = await commandStats(redis.admin);
      const commands = new Map(
        [...stats]
          .filter(([name]) => !ADMIN_COMMANDS.includes(name))
          .map(([name, { calls }]) => [name, calls]),
      );
      const scriptUsec = SCRIPT_COMMANDS.reduce((sum, name) => {
        const stat = stats.get(name);
        return sum + (stat ? stat.calls * stat.usecPerCall : 0);
      }, 0);
      return {
        perSecond,
        callsPerSecond,
        elapsed,
        notAdmitted,
        nodeCpu: (node.user + node.system) / 1e6 / elapsed,
        redisCpu,
        scriptUsec,
        commands,
      };
    },
  };
}

/** What the bench's own admin client sends around a run, left out of the contenders' commands. */
const ADMIN_COMMANDS: readonly string[] = ['info', 'config|resetstat'];

// --- The contenders ------------------------------------------------------------------------------

function sentinel(name: string, limiter: Limiter, close: () => Promise<void>): Entrant {
  return {
    name,
    async decide(key) {
      const decision = await limiter.consume(key);
      return decision.allowed && decision.degraded === undefined;
    },
    async close() {
      await limiter.close();
      await close();
    },
  };
}

function fromUrl(url: string, algorithm: Algorithm): Entrant {
  const limiter = createLimiter({ redisUrl: url, limit: LIMIT, window: `${WINDOW_S}s`, algorithm });
  return sentinel(`Sentinel ${algorithm}`, limiter, async () => {});
}

function autoPipelined(url: string, algorithm: Algorithm): Entrant {
  const client = createRedisClient(url, { enableAutoPipelining: true });
  const limiter = createLimiter({ redis: client, limit: LIMIT, window: `${WINDOW_S}s`, algorithm });
  return sentinel(`Sentinel ${algorithm}, auto-pipelining`, limiter, async () => {
    client.disconnect();
  });
}

async function nodeRedis(url: string, algorithm: Algorithm): Promise<Entrant> {
  // node-redis writes every command of one tick in one go, without an option.
  const client = createClient({ url, disableOfflineQueue: true });
  client.on('error', () => {});
  await client.connect();
  const limiter = createLimiter({ redis: client, limit: LIMIT, window: `${WINDOW_S}s`, algorithm });
  return sentinel(`Sentinel ${algorithm}, node-redis`, limiter, async () => {
    await client.close();
  });
}

/** The peers each get an ioredis client of their own, with the settings Sentinel's has. */
async function peerClient(url: string): Promise<Redis> {
  const client = new Redis(url, LIMITER_CLIENT_OPTIONS);
  client.on('error', () => {});
  // Without the offline queue, a command sent before the connection is up fails.
  if (client.status !== 'ready') await once(client, 'ready');
  return client;
}

async function rateLimitRedis(url: string): Promise<Entrant> {
  const client = await peerClient(url);
  const store = new RateLimitRedisStore({
    sendCommand: (command: string, ...args: string[]) =>
      client.call(command, ...args) as Promise<RedisReply>,
  });
  await store.init({ windowMs: WINDOW_S * 1000 } as ExpressRateLimitOptions);
  return {
    name: 'rate-limit-redis',
    decide: async (key) => (await store.increment(key)).totalHits <= LIMIT,
    close: async () => client.disconnect(),
  };
}

async function rateLimiterFlexible(url: string): Promise<Entrant> {
  const client = await peerClient(url);
  const limiter = new RateLimiterRedis({
    storeClient: client,
    useRedisPackage: false,
    points: LIMIT,
    duration: WINDOW_S,
  });
  return {
    name: 'rate-limiter-flexible',
    // consume rejects when it refuses, or when Redis fails.
    decide: (key) =>
      limiter.consume(key).then(
        () => true,
        () => false,
      ),
    close: async () => client.disconnect(),
  };
}

type ReferenceClient = Redis & {
  referenceBucket(key: string, limit: number, windowS: number, nowS: number): Promise<number>;
};

async function referenceScript(url: string): Promise<Entrant> {
  const client = (await peerClient(url)) as ReferenceClient;
  client.defineCommand('referenceBucket', { numberOfKeys: 1, lua: REFERENCE_SCRIPT });
  return {
    name: 'reference script (defineCommand)',
    decide: async (key) =>
      (await client.referenceBucket(key, LIMIT, WINDOW_S, Date.now() / 1000)) === 1,
    close: async () => client.disconnect(),
  };
}

type FloorClient = Redis & { floor(key: string): Promise<number> };

/** The one-call floor: TIME, GET and SET PX in one script call per decision, unbatched. */
async function floorScript(url: string): Promise<Entrant> {
  const client = (await peerClient(url)) as FloorClient;
  client.defineCommand('floor', { numberOfKeys: 1, lua: FLOOR_SCRIPT });
  return {
    name: FLOOR,
    decide: async (key) => (await client.floor(key)) === 1,
    close: async () => client.disconnect(),
  };
}

async function bareIncr(url: string): Promise<Entrant> {
  const client = await peerClient(url);
  return {
    name: 'bare INCR',
    decide: async (key) => (await client.incr(key)) > 0,
    close: async () => client.disconnect(),
  };
}

// --- The suite -----------------------------------------------------------------------------------

const TOKEN_BUCKET = 'Sentinel token-bucket';
const RATE_LIMITER_FLEXIBLE = 'rate-limiter-flexible';
const RATE_LIMIT_REDIS = 'rate-limit-redis';
const REFERENCE = 'reference script (defineCommand)';
const FLOOR = 'floor script (defineCommand)';

async function entrants(url: string): Promise<Entrant[]> {
  const list: Entrant[] = [];
  for (const algorithm of ALGORITHMS)
    list.push(fromUrl(url, algorithm), autoPipelined(url, algorithm));
  list.push(await nodeRedis(url, 'token-bucket'));
  for (const peer of [
    rateLimiterFlexible,
    rateLimitRedis,
    referenceScript,
    floorScript,
    bareIncr,
  ]) {
    list.push(await peer(url));
  }
  return list;
}

/**
 * At 1 in flight: Sentinel's token bucket as users set it up, the peer the target names, and the
 * floor for reference. Instances of their own, so none carries state from the 256-in-flight run.
 */
async function sequentialEntrants(url: string): Promise<Entrant[]> {
  return [fromUrl(url, 'token-bucket'), await rateLimitRedis(url), await floorScript(url)];
}

export const nodeDecisions = async (config: BenchConfig): Promise<SuiteReport> => {
  const redis = await startRedis();
  let list: Entrant[] = [];
  let sequential: Entrant[] = [];
  try {
    list = await entrants(redis.url);
    sequential = await sequentialEntrants(redis.url);
    // Each contender keeps its own 10k keys, so no one meets another's state.
    const contenders = (ms: number) => [
      ...list.map((entrant, n) => runner(redis, entrant, ms, `c${n}`, IN_FLIGHT)),
      // Named apart, since the same contenders run at 256 in flight.
      ...sequential.map((entrant, n) => ({
        ...runner(redis, entrant, ms, `s${n}`, SEQUENTIAL),
        name: oneInFlight(entrant.name),
      })),
    ];
    // Not counted: connections up, scripts loaded, code compiled, keys created.
    await alternate(1, contenders(config.smoke ? 30 : 300));
    const figures = await alternate(config.rounds, contenders(config.seconds * 1000));
    return report(config, list, sequential, figures);
  } finally {
    for (const entrant of [...list, ...sequential]) await entrant.close().catch(() => {});
    await redis.stop();
  }
};

/** A contender's name in the figures when it runs at 1 in flight. */
const oneInFlight = (name: string): string => `${name} @ ${SEQUENTIAL}`;

function report(
  config: BenchConfig,
  list: readonly Entrant[],
  sequential: readonly Entrant[],
  figures: Map<string, RoundFigures[]>,
): SuiteReport {
  const rounds = (name: string): RoundFigures[] => figures.get(name) ?? [];
  const perSecond = (name: string): number => median(rounds(name).map((r) => r.perSecond));
  const ratio = (a: string, b: string): number => perSecond(a) / perSecond(b);
  /** Redis CPU per decision, µs: all of redis-server's CPU over the run, over the calls made. */
  const redisUs = (name: string): number =>
    median(rounds(name).map((r) => (r.redisCpu / r.callsPerSecond) * 1e6));
  const perDecisionUs = (name: string, cpu: (r: RoundFigures) => number): string =>
    median(rounds(name).map((r) => (cpu(r) / r.callsPerSecond) * 1e6)).toFixed(1);

  const row = (label: string, name: string, inFlight: number): string[] => [
    label,
    String(inFlight),
    rate(perSecond(name)),
    rounds(name)
      .map((r) => rate(r.perSecond))
      .join(', '),
    perDecisionUs(name, (r) => r.nodeCpu),
    perDecisionUs(name, (r) => r.redisCpu),
    String(rounds(name).reduce((sum, r) => sum + r.notAdmitted, 0)),
  ];
  const rows = [
    ...list.map(({ name }) => row(name, name, IN_FLIGHT)),
    ...sequential.map(({ name }) => row(name, oneInFlight(name), SEQUENTIAL)),
  ];

  const pipelining = ALGORITHMS.map((algorithm) => {
    const off = rounds(`Sentinel ${algorithm}`);
    const on = rounds(`Sentinel ${algorithm}, auto-pipelining`);
    // Paired by round: the two take adjacent turns, so each pair meets the same machine noise,
    // and the median of the pairs is steadier than the ratio of the medians.
    const paired = on.map((r, i) => r.perSecond / (off[i]?.perSecond ?? Number.NaN));
    return { algorithm, value: median(paired), paired };
  });

  // Redis CPU per decision, token bucket against each: at most `most` times the other's. The
  // chart draws the other's over Sentinel's, so that higher is better there as everywhere.
  const cpuComparisons = [
    ...[FLOOR, RATE_LIMITER_FLEXIBLE, RATE_LIMIT_REDIS].map((other) => ({
      other,
      inFlight: IN_FLIGHT,
      most: 0.5,
      sentinelUs: redisUs(TOKEN_BUCKET),
      otherUs: redisUs(other),
    })),
    {
      other: RATE_LIMIT_REDIS,
      inFlight: SEQUENTIAL,
      most: 1.2,
      sentinelUs: redisUs(oneInFlight(TOKEN_BUCKET)),
      otherUs: redisUs(oneInFlight(RATE_LIMIT_REDIS)),
    },
  ];
  const shortName = (other: string): string => (other === FLOOR ? 'floor' : other);

  const ratios: Ratio[] = [
    {
      label: `token-bucket ÷ ${RATE_LIMITER_FLEXIBLE}`,
      value: ratio(TOKEN_BUCKET, RATE_LIMITER_FLEXIBLE),
      goal: 1.3,
    },
    {
      label: `token-bucket ÷ ${RATE_LIMIT_REDIS}`,
      value: ratio(TOKEN_BUCKET, RATE_LIMIT_REDIS),
      goal: 1,
    },
    { label: 'token-bucket ÷ reference script', value: ratio(TOKEN_BUCKET, REFERENCE) },
    ...cpuComparisons.map(({ other, inFlight, most, sentinelUs, otherUs }) => ({
      label: `Redis CPU, ${inFlight} in flight: ${shortName(other)} ÷ token-bucket`,
      value: otherUs / sentinelUs,
      goal: 1 / most,
    })),
    ...pipelining.map(({ algorithm, value }) => ({
      label: `${algorithm}: auto-pipelining on ÷ off`,
      value,
    })),
    {
      label: 'token-bucket: node-redis ÷ ioredis',
      value: ratio(`${TOKEN_BUCKET}, node-redis`, TOKEN_BUCKET),
    },
  ];

  const target = (peer: string, goal: number): Target => {
    const value = ratio(TOKEN_BUCKET, peer);
    return {
      goal: `token-bucket decisions/s at least ${goal.toFixed(1)}× ${peer}'s`,
      figure: `${times(value)} (${rate(perSecond(TOKEN_BUCKET))}/s vs ${rate(perSecond(peer))}/s)`,
      met: value >= goal,
    };
  };
  const cpuTargets: Target[] = cpuComparisons.map(
    ({ other, inFlight, most, sentinelUs, otherUs }) => ({
      goal: `token-bucket Redis CPU per decision at most ${most}× ${other === FLOOR ? "the one-call floor's" : `${other}'s`}, at ${inFlight} in flight`,
      figure: `${times(sentinelUs / otherUs)} (${us(sentinelUs)} against ${us(otherUs)})`,
      met: sentinelUs <= most * otherUs,
    }),
  );
  const sentinelRuns = [
    ...list.filter(({ name }) => name.startsWith('Sentinel')).map(({ name }) => name),
    ...sequential
      .filter(({ name }) => name.startsWith('Sentinel'))
      .map(({ name }) => oneInFlight(name)),
  ];
  const sentinelMisses = sentinelRuns.reduce(
    (sum, name) => sum + rounds(name).reduce((s, r) => s + r.notAdmitted, 0),
    0,
  );

  return {
    title: 'Decisions per second from one Node process',
    method:
      `One Node process keeps ${IN_FLIGHT} decisions in flight for ${config.seconds} s per round, ` +
      `over ${KEYS / 1000}k keys, against a redis-server of its own on loopback; ${config.rounds} ` +
      'rounds, contenders taking turns (every other round in reverse) after an uncounted ' +
      'warm-up, each reported by its median. Sentinel runs `createLimiter({ redisUrl, limit, ' +
      'window, algorithm })` with default options for each algorithm; again with ' +
      '`createRedisClient(url, { enableAutoPipelining: true })` passed as `redis`; and the token ' +
      'bucket once more on a node-redis 6 client. Each peer gets an ioredis 6 client of its own ' +
      'with `LIMITER_CLIENT_OPTIONS`, the settings of the client Sentinel builds: ' +
      "rate-limit-redis's store (`increment`), rate-limiter-flexible's `RateLimiterRedis` " +
      "(`consume`), the original design's token-bucket script through `defineCommand`, and a " +
      `bare \`INCR\`, and the one-call floor (\`TIME\`, \`GET\`, \`SET PX\` in one script per decision). Sentinel batches the decisions that arrive in one turn of the event loop into one script call, by default. In the same rounds, taking their turns with the rest, Sentinel's token bucket (\`redisUrl\`, default options), rate-limit-redis and the floor run again, instances of their own, at ${SEQUENTIAL} in flight: one decision at a time, each awaited before the next is sent. Limits are ${LIMIT.toLocaleString('en')} per hour, so every call is ` +
      "admitted. CPU per decision is Node's `process.cpuUsage()` and redis-server's " +
      "`INFO cpu` (user and system, so Redis's networking too), divided by the decisions made. " +
      "Redis CPU per decision is the script-cost target: it replaces the floor's rate under " +
      '`redis-benchmark` (the Redis cost suite), which is kept as information.',
    columns: [
      'contender',
      'in flight',
      'decisions/s',
      'each round',
      'Node CPU µs/decision',
      'Redis CPU µs/decision',
      'not admitted',
    ],
    rows,
    ratios,
    targets: [
      target(RATE_LIMITER_FLEXIBLE, 1.3),
      target(RATE_LIMIT_REDIS, 1),
      ...cpuTargets,
      {
        goal: `no Sentinel call refused, degraded or failed, at ${IN_FLIGHT} or ${SEQUENTIAL} in flight`,
        figure: `${sentinelMisses} not admitted`,
        met: sentinelMisses === 0,
      },
    ],
    notes: [
      batchingNote(rounds),
      sequentialNote(rounds),
      pipeliningNote(pipelining),
      bottleneckNote(rounds),
      ...(sentinelMisses > 0 ? [missesNote(sentinelRuns, rounds)] : []),
    ],
  };
}

/** Where Redis's CPU per decision goes: its scripts, the rest, and the commands it ran. */
interface RedisSplit {
  /** µs of Redis CPU per decision, all of it (INFO cpu). */
  readonly total: number;
  /** µs per decision in top-level script calls (INFO commandstats). */
  readonly script: number;
  /** µs per decision outside them: reading, parsing and answering calls, waking up for them. */
  readonly outside: number;
  /** Commands Redis ran per decision, the script's own first. */
  readonly commands: string;
}

function redisSplit(runs: readonly RoundFigures[]): RedisSplit {
  const calls = (r: RoundFigures): number => r.callsPerSecond * r.elapsed;
  const total = median(runs.map((r) => (r.redisCpu / r.callsPerSecond) * 1e6));
  const script = median(runs.map((r) => r.scriptUsec / calls(r)));
  const last = runs.at(-1);
  const rank = ([command, n]: [string, number]): number =>
    SCRIPT_COMMANDS.includes(command) ? Number.POSITIVE_INFINITY : n;
  const commands = last
    ? [...last.commands]
        .sort((x, y) => rank(y) - rank(x))
        .map(([command, n]) => `${command.toUpperCase()} ${Number((n / calls(last)).toFixed(2))}`)
        .join(', ')
    : '';
  return { total, script, outside: total - script, commands };
}

const splitLine = (name: string, s: RedisSplit): string =>
  `${name} ${us(s.total)}, ${us(s.script)} of it in scripts (per decision: ${s.commands})`;

/**
 * At 256 in flight batching saves Redis the work outside the script, once per call rather than
 * per decision: the split shows how much the peers spend there, and so how much it can save.
 */
function batchingNote(rounds: (name: string) => RoundFigures[]): string {
  const sentinel = redisSplit(rounds(TOKEN_BUCKET));
  const others = [RATE_LIMIT_REDIS, RATE_LIMITER_FLEXIBLE, FLOOR].map((name) => ({
    name: name === FLOOR ? 'the floor' : name,
    split: redisSplit(rounds(name)),
  }));
  const peer = others[0]?.split as RedisSplit;
  const alone = sentinel.script / peer.total;
  return (
    `At ${IN_FLIGHT} in flight, Redis CPU per decision (\`INFO cpu\`), the part in scripts ` +
    `(\`INFO commandstats\`, whose timing also counts a script's time off the CPU) and the ` +
    `commands run: ${splitLine(TOKEN_BUCKET, sentinel)}; ` +
    `${others.map((o) => splitLine(o.name, o.split)).join('; ')}. Batching saves what Redis ` +
    'spends outside the scripts, reading, parsing and answering calls, and `TIME`, once per ' +
    `batch; the peers spend ${others.map((o) => `${us(o.split.outside)} (${o.name})`).join(', ')} ` +
    'per decision there, which depends on the host: what its system calls cost, and how many ' +
    "calls arrive while Redis is busy, to be read together. Sentinel's " +
    `script work alone is ${times(alone)} rate-limit-redis's whole decision` +
    (alone > 0.5 ? ': here no saving outside the scripts could bring it to 0.5×.' : '.')
  );
}

/**
 * At 1 in flight each decision is a round trip of its own: Redis's CPU per decision is its script
 * plus the call's own work (read, parse, reply, wake up), and the split shows where the gap is.
 */
function sequentialNote(rounds: (name: string) => RoundFigures[]): string {
  const sentinel = redisSplit(rounds(oneInFlight(TOKEN_BUCKET)));
  const peer = redisSplit(rounds(oneInFlight(RATE_LIMIT_REDIS)));
  const floor = redisSplit(rounds(oneInFlight(FLOOR)));
  return (
    `At ${SEQUENTIAL} in flight, the same figures: ${splitLine(TOKEN_BUCKET, sentinel)}; ` +
    `${splitLine(RATE_LIMIT_REDIS, peer)}; ${splitLine('the floor', floor)}. Outside the ` +
    'scripts, reading, parsing and answering each call and waking up for the next, Redis spent ' +
    `${us(sentinel.outside)}, ${us(peer.outside)} and ${us(floor.outside)}: the same work ` +
    'whoever calls, which varies most with the host and its load, and the more of it, the nearer ' +
    "1× every ratio here. In the scripts Sentinel's token bucket spends " +
    `${times(sentinel.script / peer.script)} rate-limit-redis's: it reads Redis's clock ` +
    "(`TIME`), parses and formats its state, works out the bucket and sets the key's expiry " +
    "anew on every call, where rate-limit-redis's `INCR` and `PTTL` change an integer in place. " +
    `The floor, which only reads the clock, \`GET\`s and \`SET\`s with \`PX\`, costs ` +
    `${times(floor.total / peer.total)} rate-limit-redis's whole decision.`
  );
}

function pipeliningNote(
  pipelining: readonly { algorithm: string; value: number; paired: number[] }[],
): string {
  const wins = pipelining.filter(({ value }) => value > 1.02).length;
  const losses = pipelining.filter(({ value }) => value < 0.98).length;
  const each = pipelining
    .map(
      ({ algorithm, value, paired }) =>
        `${algorithm} ${times(value)} (rounds: ${paired.map(times).join(', ')})`,
    )
    .join('; ');
  const verdict =
    wins === pipelining.length
      ? 'ioredis auto-pipelining wins for every algorithm'
      : losses === pipelining.length
        ? 'ioredis auto-pipelining loses for every algorithm'
        : `ioredis auto-pipelining wins (by more than 2%) for ${wins} of ${pipelining.length} algorithms and loses for ${losses}`;
  return `Auto-pipelining, on ÷ off at ${IN_FLIGHT} in flight, median of the rounds' pairs: ${verdict}. ${each}.`;
}

function bottleneckNote(rounds: (name: string) => RoundFigures[]): string {
  const cores = (name: string, side: (r: RoundFigures) => number): string =>
    median(rounds(name).map(side)).toFixed(2);
  const line = (name: string): string =>
    `${name} keeps Node at ${cores(name, (r) => r.nodeCpu)} cores and redis-server at ` +
    `${cores(name, (r) => r.redisCpu)}`;
  return (
    `Where the time goes (one core is 1.00): ${line(TOKEN_BUCKET)}; ` +
    `${line(`${TOKEN_BUCKET}, auto-pipelining`)}; ${line(RATE_LIMITER_FLEXIBLE)}; ` +
    `${line(RATE_LIMIT_REDIS)}. Node and Redis share two cores here, so the side nearer ` +
    '1.00 is the bottleneck, and Node CPU per decision is what our own JavaScript costs.'
  );
}

function missesNote(names: readonly string[], rounds: (name: string) => RoundFigures[]): string {
  const misses = names.flatMap((name) =>
    rounds(name).flatMap((r, i) =>
      r.notAdmitted ? [`${name} round ${i + 1}: ${r.notAdmitted}`] : [],
    ),
  );
  return (
    `Degraded answers under load (the limits admit every call, so each miss is a store failure ` +
    `answered by the failure policy, not counted in decisions/s): ${misses.join('; ')}. A call ` +
    'fails when Redis sends nothing for its deadline while this process waits; on a machine ' +
    'whose cores are shared, a redis-server kept off the CPU that long looks the same.'
  );
}
