// HTTP: requests per second and p99 for Express, Koa and Fastify, bare, at the one-call floor,
// with Sentinel set up four ways and with each framework's usual peer, all on the bench's Redis.
import {
  type Contender,
  contendersOf,
  SENTINEL_CONTENDERS,
  type SentinelContender,
} from '../http/contenders.ts';
import { CONNECTIONS, KEY_COUNTS, type Load, load } from '../http/load.ts';
import { type ServerProcess, startServer } from '../http/server-process.ts';
import { FRAMEWORKS, type Framework, HUGE_LIMIT, isSentinel, PEERS } from '../http/variants.ts';
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
 * CI's gate: Sentinel under one hot key, as users write it, over the floor keyed alike. Only a
 * collapse fails; a smoke run's ratio below it is measured again, longer, before it counts.
 */
const GATED = 'sentinel-as-written';
const COLLAPSE = 0.5;
const RECHECK = { rounds: 3, seconds: 0.5 };

const NAMES: Record<Framework, string> = { express: 'Express', koa: 'Koa', fastify: 'Fastify' };

interface Figures {
  readonly contender: Contender;
  rps: number;
  p99: number;
  /** Connection errors and timeouts, over all rounds. */
  errors: number;
  /** Failures Sentinel reported (a decision past the deadline, say), over all rounds. */
  failures?: number;
}

interface Measured {
  readonly figures: Map<string, Figures>;
  /** The gated contender's req/s over its floor's. */
  readonly gate: number;
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
      servers.push([contender, await startServer(framework, contender.variant, redisUrl)]);
    }
    const runs = await alternate<Load>(
      rounds,
      servers.map(([contender, server]) => ({
        name: contender.name,
        run: () => load(server.port, warmUp, seconds, contender.keys),
      })),
    );
    const gate = await gateRatio(servers, runs, warmUp);
    const failures = await Promise.all(servers.map(([, server]) => server.stop()));
    const figures = new Map<string, Figures>();
    for (const [i, [contender]] of servers.entries()) {
      const loads = runs.get(contender.name) ?? [];
      figures.set(contender.name, {
        contender,
        rps: median(loads.map((l) => l.rps)),
        p99: median(loads.map((l) => l.p99)),
        errors: loads.reduce((sum, l) => sum + l.errors, 0),
        ...(isSentinel(contender.variant) && { failures: failures[i] }),
      });
    }
    return { figures, gate };
  } finally {
    await Promise.all(servers.map(([, server]) => server.stop()));
  }
}

/**
 * The gated contender's share of its floor, from the runs; when that is a collapse, from a
 * longer recheck of the two alone, so that one unlucky moment of a short run cannot fail CI.
 */
async function gateRatio(
  servers: readonly [Contender, ServerProcess][],
  runs: Map<string, Load[]>,
  warmUp: number,
): Promise<number> {
  const gated = SENTINEL_CONTENDERS.find((s) => s.name === GATED) as SentinelContender;
  const ratio = (figures: Map<string, Load[]>) =>
    median((figures.get(GATED) ?? []).map((l) => l.rps)) /
    median((figures.get(gated.floor) ?? []).map((l) => l.rps));
  const first = ratio(runs);
  if (first >= COLLAPSE) return first;
  const pair = servers.filter(([c]) => c.name === GATED || c.name === gated.floor);
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
      name,
      contender.label,
      contender.counted,
      rate(r),
      ms(p99),
      (r / bare).toFixed(2),
      contender.floor ? (r / rps(contender.floor)).toFixed(2) : '',
    ]);
  }
  for (const s of SENTINEL_CONTENDERS) judgeSentinel(name, framework, s, rps, into);
  const sentinel = rps('sentinel');
  const floor = rps('floor-one');
  into.notes.push(
    `${name} toward ${BARE_SHARE_AIM}× of bare: Sentinel's defaults keep ${(sentinel / bare).toFixed(2)}, ` +
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

/** One Sentinel contender's bars and targets: against its floor, keyed alike, and each peer. */
function judgeSentinel(
  name: string,
  framework: Framework,
  s: SentinelContender,
  rps: (contender: string) => number,
  into: Findings,
): void {
  const r = rps(s.name);
  const bare = rps('bare');
  const floor = rps(s.floor);
  const keys = `${KEY_COUNTS[s.keys].toLocaleString('en-US')} key${s.keys === 'one' ? '' : 's'}`;
  into.ratios.push({ label: `${name}: ${s.short} ÷ floor`, value: r / floor, goal: FLOOR_GOAL });
  into.targets.push({
    goal: `${name}: ${s.short} keeps at least ${FLOOR_GOAL}× the one-call floor's throughput (${keys})`,
    figure: `${rate(r)} req/s against the floor's ${rate(floor)}: ${times(r / floor)}`,
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
      figure: `${s.short} ${(r / bare).toFixed(2)} of bare, ${peer} ${(peerRps / bare).toFixed(2)}: ${times(r / peerRps)}`,
      met: goal === 1 ? r > peerRps : r / peerRps >= goal,
    });
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
  for (const [framework, { figures, gate }] of results) {
    judge(framework, figures, findings);
    gates.push({
      label: `${NAMES[framework]}: Sentinel as users write it (one hot key) ÷ the floor keyed alike`,
      value: gate,
      collapse: COLLAPSE,
    });
  }
  findings.notes.push(
    `Keys: the load sends \`x-api-key\` one of three ways: one key on every request; one per connection (${CONNECTIONS} keys); or ${KEY_COUNTS.spread.toLocaleString('en-US')} keys, each connection cycling through its share of them. autocannon builds every request's bytes before the run, so the 10,000 keys cost the client nothing per request. The floor keys its call by the header, and is measured each way; each limiter's share of the floor is against the floor keyed as that limiter counts.`,
    "Identity: Sentinel's default, `byIp()`, counts by client IP, since nothing confirms a key, and so do the peers by default: all their requests share one key, and they are set against the one-key floor. Sentinel by key uses `identify: (req) => ({ key: req.headers['x-api-key'] })`, synchronous; as users write it, it also takes the app's own ioredis client (`redis: new Redis({ host, port })`, ioredis's defaults) in place of `redisUrl`, under one hot key.",
    `Targets: Sentinel, each way, keeps at least ${FLOOR_GOAL}× the floor keyed alike; its defaults keep more than each peer, as before, and the set-ups users choose at least ${PEER_GOAL}× each peer.`,
    'Sentinel runs with the options named plus an `onError` that only counts failures, so that a decision taken without Redis cannot pass unseen.',
    "Redis, the server and autocannon share the machine: every Redis call costs the server a socket write (the largest single item in a CPU profile of the floor's server and of Sentinel's) and Redis its CPU, on the cores the framework needs. The floor's share of bare is the most that one call per request can keep here.",
  );
  return {
    title: 'HTTP: requests per second, Express, Koa and Fastify',
    method:
      `autocannon (${CONNECTIONS} keep-alive connections) against each contender in a server process of its own, ` +
      'answering `GET /` with a tiny JSON body: the bare framework; the floor, one EVALSHA of a script that calls TIME, GET and SET PX through ioredis, keyed by API key, at 1, 32 and 10,000 keys; ' +
      "Sentinel's adapter with default options and `redisUrl`, with a synchronous `identify` by API key at 32 and at 10,000 keys, and as users write it (the app's own ioredis client and `identify`, one key); and the framework's usual peers on Redis (express-rate-limit with rate-limit-redis, and rate-limiter-flexible, on Express; koa-ratelimit on Koa; @fastify/rate-limit on Fastify). " +
      `Every limit is ${HUGE_LIMIT.toLocaleString('en-US')} a minute, so nothing is refused and each request does the full work. ` +
      "The contenders of one framework take turns, each after a short warm-up, round after round; req/s and p99 are medians over the rounds, and a share is a limiter's req/s over bare's (or the floor's) in the same run.",
    columns: ['framework', 'contender', 'keys', 'req/s', 'p99', 'share of bare', 'share of floor'],
    ...findings,
    gates,
  };
}

export const http: Suite = async (config) => {
  const warmUp = config.smoke ? 0.1 : Math.min(1, config.seconds / 2);
  const seconds = config.smoke ? 0.2 : config.seconds;
  const rounds = config.smoke ? 1 : config.rounds;
  const redis = await startRedis();
  try {
    const results = new Map<Framework, Measured>();
    for (const framework of FRAMEWORKS) {
      results.set(framework, await measure(framework, redis.url, rounds, warmUp, seconds));
    }
    return report(results);
  } finally {
    await redis.stop();
  }
};
