// HTTP: requests per second and p99 for Express, Koa, Fastify, Hono and Nest (on Express and on
// Fastify), bare, at the one-call floor, with Sentinel set up as users do and with each framework's
// usual peer, all on the bench's Redis; and Hono's bare app, floor and Sentinel again on Bun.
import { execFileSync } from 'node:child_process';
import {
  type Contender,
  contendersOf,
  type SentinelContender,
  sentinelContendersOf,
} from '../http/contenders.ts';
import { CONNECTIONS, KEY_COUNTS, type Load, load } from '../http/load.ts';
import { compileNestApp } from '../http/nest-app.ts';
import { type ServerProcess, startServer } from '../http/server-process.ts';
import {
  FRAMEWORKS,
  type Framework,
  HUGE_LIMIT,
  isNest,
  isSentinel,
  PEERS,
} from '../http/variants.ts';
import { bunBinary } from '../lib/bun-binary.ts';
import {
  alternate,
  type Gate,
  median,
  ms,
  type Ratio,
  rate,
  type Suite,
  type SuiteReport,
  type Target,
  times,
} from '../lib/measure.ts';
import { startRedis } from '../lib/redis-server.ts';

/** Where the issue says batching or the block cache must take over from one call per request. */
const BARE_SHARE_AIM = 0.85;
const FLOOR_GOAL = 0.95;
/** What Sentinel's set-ups other than its defaults must keep over each peer. */
const PEER_GOAL = 1.05;
/**
 * CI's gates: Sentinel under one hot key, as users write it, over the floor keyed alike, on each
 * runtime it runs on. Only a collapse fails; a smoke run's ratio below it is measured again,
 * longer, before it counts.
 */
const GATED = ['sentinel-as-written', 'bun-sentinel-as-written'];
const COLLAPSE = 0.5;
const RECHECK = { rounds: 3, seconds: 0.5 };

const NAMES: Record<Framework, string> = {
  express: 'Express',
  koa: 'Koa',
  fastify: 'Fastify',
  hono: 'Hono',
  'nest-express': 'Nest on Express',
  'nest-fastify': 'Nest on Fastify',
};

/** The name a contender's rows, bars and targets go under: its framework, and Bun if it runs there. */
function nameOf(framework: Framework, contender: Contender): string {
  return contender.runtime === 'bun' ? `${NAMES[framework]} on Bun` : NAMES[framework];
}

interface Figures {
  readonly contender: Contender;
  /** Req/s in each round, in round order. */
  rounds: number[];
  rps: number;
  p99: number;
  /** Connection errors and timeouts, over all rounds. */
  errors: number;
  /** Failures Sentinel reported (a decision past the deadline, say), over all rounds. */
  failures?: number;
}

interface Measured {
  readonly figures: Map<string, Figures>;
  /** Each gated contender's req/s over its floor's. */
  readonly gates: Map<Contender, number>;
}

/** Starts a server per contender of a framework, loads them in turn, round after round, then stops them. */
async function measure(
  framework: Framework,
  redisUrl: string,
  rounds: number,
  warmUp: number,
  seconds: number,
): Promise<Measured> {
  const servers: [Contender, ServerProcess][] = [];
  try {
    // One at a time: starting them together would only make each start slower.
    for (const contender of contendersOf(framework)) {
      const server = await startServer(framework, contender.variant, redisUrl, contender.runtime);
      servers.push([contender, server]);
    }
    const runs = await alternate<Load>(
      rounds,
      servers.map(([contender, server]) => ({
        name: contender.name,
        run: () => load(server.port, warmUp, seconds, contender.keys),
      })),
    );
    const gates = new Map<Contender, number>();
    for (const [gated] of servers.filter(([c]) => GATED.includes(c.name))) {
      gates.set(gated, await gateRatio(gated, servers, runs, warmUp));
    }
    const failures = await Promise.all(servers.map(([, server]) => server.stop()));
    const figures = new Map<string, Figures>();
    for (const [i, [contender]] of servers.entries()) {
      const loads = runs.get(contender.name) ?? [];
      figures.set(contender.name, {
        contender,
        rounds: loads.map((l) => l.rps),
        rps: median(loads.map((l) => l.rps)),
        p99: median(loads.map((l) => l.p99)),
        errors: loads.reduce((sum, l) => sum + l.errors, 0),
        ...(isSentinel(contender.variant) && { failures: failures[i] }),
      });
    }
    return { figures, gates };
  } finally {
    await Promise.all(servers.map(([, server]) => server.stop()));
  }
}

/**
 * A gated contender's share of its floor, from the runs; when that is a collapse, from a
 * longer recheck of the two alone, so that one unlucky moment of a short run cannot fail CI.
 */
async function gateRatio(
  gated: Contender,
  servers: readonly [Contender, ServerProcess][],
  runs: Map<string, Load[]>,
  warmUp: number,
): Promise<number> {
  const ratio = (figures: Map<string, Load[]>) =>
    median((figures.get(gated.name) ?? []).map((l) => l.rps)) /
    median((figures.get(gated.floor ?? '') ?? []).map((l) => l.rps));
  const first = ratio(runs);
  if (first >= COLLAPSE) return first;
  const pair = servers.filter(([c]) => c.name === gated.name || c.name === gated.floor);
  return ratio(
    await alternate<Load>(
      RECHECK.rounds,
      pair.map(([contender, server]) => ({
        name: contender.name,
        run: () => load(server.port, warmUp, RECHECK.seconds, contender.keys),
      })),
    ),
  );
}

/** The rows, bars, targets and notes of one framework. */
function judge(framework: Framework, figures: Map<string, Figures>, into: Findings): void {
  const name = NAMES[framework];
  const rps = (contender: string) => figures.get(contender)?.rps ?? Number.NaN;
  const bare = rps('bare');
  for (const { contender, rps: r, p99 } of figures.values()) {
    into.rows.push([
      nameOf(framework, contender),
      contender.label,
      contender.counted,
      rate(r),
      ms(p99),
      (r / rps(contender.bare ?? 'bare')).toFixed(2),
      contender.floor ? (r / rps(contender.floor)).toFixed(2) : '',
    ]);
  }
  const sentinels = sentinelContendersOf(framework);
  for (const s of sentinels) {
    if (s.runtime === 'bun') judgeOnBun(s, figures, into);
    else judgeSentinel(name, framework, s, figures, into);
  }
  // The aim is of Sentinel's defaults, or of the one way a framework is measured.
  const first = sentinels[0] as SentinelContender;
  const sentinel = rps(first.name);
  const floor = rps('floor-one');
  into.notes.push(
    `${name} toward ${BARE_SHARE_AIM}× of bare: ${first.name === 'sentinel' ? "Sentinel's defaults keep" : `${first.short} keeps`} ${(sentinel / bare).toFixed(2)}, ` +
      `${Math.round((100 * sentinel) / bare / BARE_SHARE_AIM)}% of the way; the one-call floor ` +
      `keeps ${(floor / bare).toFixed(2)}, so one call per request alone leaves ` +
      `${Math.max(0, BARE_SHARE_AIM - floor / bare).toFixed(2)} of bare to win by batching or the block cache.`,
  );
  const failed = [...figures.values()].filter((f) => f.failures !== undefined && f.failures !== 0);
  if (failed.length) {
    into.notes.push(
      `${name}: Sentinel reported failures, each a decision taken without Redis's answer (past the deadline, or with the breaker open), which answers sooner than a counted one and flatters its figures: ` +
        `${failed.map((f) => `${f.contender.name} ${f.failures ?? 'an unknown number'}`).join(', ')}.`,
    );
  }
  const errors = [...figures.values()].filter((f) => f.errors > 0);
  if (errors.length) {
    into.notes.push(
      `${name}: connection errors or timeouts: ${errors.map((f) => `${f.contender.name} ${f.errors}`).join(', ')}.`,
    );
  }
}

/**
 * `a`'s req/s over `b`'s round by round, as the range its median is taken from: the two ran
 * one after the other in each round, so each round's ratio is a same-moment comparison.
 */
function spread(figures: Map<string, Figures>, a: string, b: string): string {
  const over = figures.get(b)?.rounds ?? [];
  const ratios = (figures.get(a)?.rounds ?? []).map((r, i) => r / (over[i] ?? Number.NaN));
  if (ratios.length < 2) return '';
  return ` (rounds ${Math.min(...ratios).toFixed(2)} to ${Math.max(...ratios).toFixed(2)})`;
}

/** One Sentinel contender's bars and targets: against its floor, keyed alike, and each peer. */
function judgeSentinel(
  name: string,
  framework: Framework,
  s: SentinelContender,
  figures: Map<string, Figures>,
  into: Findings,
): void {
  const rps = (contender: string) => figures.get(contender)?.rps ?? Number.NaN;
  const r = rps(s.name);
  const bare = rps('bare');
  const floor = rps(s.floor);
  const keys = `${KEY_COUNTS[s.keys].toLocaleString('en-US')} key${s.keys === 'one' ? '' : 's'}`;
  into.ratios.push({ label: `${name}: ${s.short} ÷ floor`, value: r / floor, goal: FLOOR_GOAL });
  into.targets.push({
    goal: `${name}: ${s.short} keeps at least ${FLOOR_GOAL}× the one-call floor's throughput (${keys})`,
    figure: `${rate(r)} req/s against the floor's ${rate(floor)}: ${times(r / floor)}${spread(figures, s.name, s.floor)}`,
    met: r / floor >= FLOOR_GOAL,
  });
  // Sentinel's defaults keep the target they always had, more than the peer; the set-ups users
  // choose must keep PEER_GOAL of it.
  const goal = s.name === 'sentinel' ? 1 : PEER_GOAL;
  for (const peer of PEERS[framework]) {
    const peerRps = rps(peer);
    // Both shares are of the same bare figure, so their ratio is that of the req/s.
    into.ratios.push({
      label: `${name}: ${s.short}'s share of bare ÷ ${peer}'s`,
      value: r / peerRps,
      goal,
    });
    into.targets.push({
      goal:
        goal === 1
          ? `${name}: ${s.short} keeps more of the bare throughput than ${peer}`
          : `${name}: ${s.short} keeps at least ${goal}× the bare throughput ${peer} keeps`,
      figure: `${s.short} ${(r / bare).toFixed(2)} of bare, ${peer} ${(peerRps / bare).toFixed(2)}: ${times(r / peerRps)}${spread(figures, s.name, peer)}`,
      met: goal === 1 ? r > peerRps : r / peerRps >= goal,
    });
  }
}

/**
 * Sentinel on Bun: its bar over the floor on Bun, and a note setting its shares beside those
 * of the same contender on Node. Information: no target is set on Bun.
 */
function judgeOnBun(s: SentinelContender, figures: Map<string, Figures>, into: Findings): void {
  const rps = (contender: string) => figures.get(contender)?.rps ?? Number.NaN;
  const node = s.name.replace(/^bun-/, '');
  const nodeFloor = s.floor.replace(/^bun-/, '');
  const [r, bare, floor] = [rps(s.name), rps('bun-bare'), rps(s.floor)];
  into.ratios.push({ label: `Hono on Bun: ${s.short} ÷ floor`, value: r / floor });
  const onNode = (a: string, b: string) => (rps(a) / rps(b)).toFixed(2);
  into.notes.push(
    `Hono on Bun ${bunVersion()}, the same app served by \`Bun.serve({ fetch: app.fetch })\`, loaded by the same autocannon from Node: ` +
      `${s.short} keeps ${(r / bare).toFixed(2)} of bare on Bun and ${times(r / floor)} the floor on Bun${spread(figures, s.name, s.floor)}; ` +
      `on Node, ${onNode(node, 'bare')} of bare and ${times(rps(node) / rps(nodeFloor))} the floor. ` +
      `Bun against Node, req/s: bare ${times(bare / rps('bare'))}, the floor ${times(floor / rps(nodeFloor))}, ${s.short} ${times(r / rps(node))}${spread(figures, s.name, node)}.`,
  );
}

/** The version of the Bun that runs the servers, for the notes. */
function bunVersion(): string {
  try {
    return execFileSync(bunBinary(), ['--version'], { encoding: 'utf8' }).trim();
  } catch {
    return '(version unknown)';
  }
}

interface Findings {
  rows: string[][];
  ratios: Ratio[];
  targets: Target[];
  notes: string[];
}

function report(results: Map<Framework, Measured>): SuiteReport {
  const findings: Findings = { rows: [], ratios: [], targets: [], notes: [] };
  const gates: Gate[] = [];
  for (const [framework, { figures, gates: measured }] of results) {
    judge(framework, figures, findings);
    for (const [gated, value] of measured) {
      gates.push({
        label: `${nameOf(framework, gated)}: Sentinel as users write it (one hot key) ÷ the floor keyed alike`,
        value,
        collapse: COLLAPSE,
      });
    }
  }
  findings.notes.push(
    `Keys: the load sends \`x-api-key\` one of three ways: one key on every request; one per connection (${CONNECTIONS} keys); or ${KEY_COUNTS.spread.toLocaleString('en-US')} keys, each connection cycling through its share of them. autocannon builds every request's bytes before the run, so the 10,000 keys cost the client nothing per request. The floor keys its call by the header, and is measured each way; each limiter's share of the floor is against the floor keyed as that limiter counts.`,
    "Identity: Sentinel's default, `byIp()`, counts by client IP, since nothing confirms a key, and so do the peers by default: all their requests share one key, and they are set against the one-key floor. Sentinel by key uses `identify: (req) => ({ key: req.headers['x-api-key'] })`, synchronous; as users write it, it also takes the app's own ioredis client (`redis: new Redis({ host, port })`, ioredis's defaults) in place of `redisUrl`, under one hot key.",
    "Hono: Sentinel is measured as users write it, `app.use(rateLimit({ redis, limit, window, identify }))`, under one hot key. hono-rate-limiter has no default key: its `keyGenerator` reads the same header, so it counts one key too. Its Redis store is its own `RedisStore`, which takes a client with @upstash/redis's calls (`scriptLoad`, `evalsha(sha, keys, args)`, `decr`, `del`); it is given an ioredis client behind those four calls, one command each, as its documentation asks of any other client. Before its 0.5 its README listed rate-limit-redis among its stores; 0.5 dropped it for its own.",
    "Nest (its app compiled by tsc with `experimentalDecorators` and `emitDecoratorMetadata`, as `nest build` compiles it): Sentinel is measured as users write it, `SentinelModule.forRoot({ redis, limit, window, identify })` with the app's own ioredis client (`new Redis({ host, port })`) and `SentinelGuard` as `APP_GUARD`. @nestjs/throttler has one throttler, `{ name: 'default', ttl, limit }`, its `ThrottlerGuard` as `APP_GUARD`, and @nest-lab/throttler-storage-redis's `ThrottlerStorageRedisService` on a client made the same way, on the same Redis; its `getTracker` reads the same header as Sentinel's `identify`, so both count one hot key. That storage sends its script by `EVAL` on every call, as it is published; the floor is a guard making the one EVALSHA.",
    `Targets: Sentinel, each way, keeps at least ${FLOOR_GOAL}× the floor keyed alike; its defaults keep more than each peer, as before, and the set-ups users choose at least ${PEER_GOAL}× each peer. A figure ends with its ratio's range over the rounds, each round's taken between runs made one after the other; the target is judged on the medians.`,
    'Sentinel runs with the options named plus an `onError` that only counts failures, so that a decision taken without Redis cannot pass unseen.',
    "Redis, the server and autocannon share the machine: every Redis call costs the server a socket write (the largest single item in a CPU profile of the floor's server and of Sentinel's) and Redis its CPU, on the cores the framework needs. The floor's share of bare is the most that one call per request can keep here.",
  );
  return {
    title: 'HTTP: requests per second, Express, Koa, Fastify, Hono and Nest',
    method:
      `autocannon (${CONNECTIONS} keep-alive connections) against each contender in a server process of its own, ` +
      'answering `GET /` with a tiny JSON body: the bare framework; the floor, one EVALSHA of a script that calls TIME, GET and SET PX through ioredis, keyed by API key, at 1, 32 and 10,000 keys; ' +
      "Sentinel's adapter with default options and `redisUrl`, with a synchronous `identify` by API key at 32 and at 10,000 keys, and as users write it (the app's own ioredis client and `identify`, one key); and the framework's usual peers on Redis (express-rate-limit with rate-limit-redis, and rate-limiter-flexible, on Express; koa-ratelimit on Koa; @fastify/rate-limit on Fastify). " +
      'Hono, on @hono/node-server, has four: bare, the floor (one key), Sentinel as users write it and hono-rate-limiter with its RedisStore; and bare, the floor and Sentinel again on Bun, `Bun.serve({ fetch: app.fetch })`, where a share is of bare or the floor on Bun. ' +
      "Nest, on Express and on Fastify, has four, each a global guard but bare: bare, the floor (one key), `SentinelGuard` and @nestjs/throttler's `ThrottlerGuard` on @nest-lab/throttler-storage-redis. " +
      `Every limit is ${HUGE_LIMIT.toLocaleString('en-US')} a minute, so nothing is refused and each request does the full work. ` +
      "The contenders of one framework take turns, each after a short warm-up, round after round; req/s and p99 are medians over the rounds, and a share is a limiter's req/s over bare's (or the floor's) in the same run.",
    columns: ['framework', 'contender', 'keys', 'req/s', 'p99', 'share of bare', 'share of floor'],
    ...findings,
    gates,
  };
}

/** The frameworks `--only` names, all by default. */
function chosen(only: readonly string[] | undefined): readonly Framework[] {
  if (only === undefined) return FRAMEWORKS;
  const unknown = only.filter((name) => !(FRAMEWORKS as readonly string[]).includes(name));
  if (unknown.length) {
    throw new TypeError(
      `--only names no framework ${unknown.join(', ')}; the HTTP suite's are ${FRAMEWORKS.join(', ')}`,
    );
  }
  return FRAMEWORKS.filter((framework) => only.includes(framework));
}

export const http: Suite = async (config) => {
  const warmUp = config.smoke ? 0.1 : Math.min(1, config.seconds / 2);
  const seconds = config.smoke ? 0.2 : config.seconds;
  const rounds = config.smoke ? 1 : config.rounds;
  const frameworks = chosen(config.only);
  // Nest's app needs decorator metadata: tsc compiles it, as `nest build` would, before it starts.
  if (frameworks.some(isNest)) compileNestApp();
  const redis = await startRedis();
  try {
    const results = new Map<Framework, Measured>();
    for (const framework of frameworks) {
      results.set(framework, await measure(framework, redis.url, rounds, warmUp, seconds));
    }
    return report(results);
  } finally {
    await redis.stop();
  }
};
