// HTTP: requests per second and p99 for Express, Koa and Fastify, bare, at the one-call floor,
// with Sentinel and with each framework's usual peer, all on the bench's Redis.
import { CONNECTIONS, type Load, load } from '../http/load.ts';
import { type ServerProcess, startServer } from '../http/server-process.ts';
import {
  FRAMEWORKS,
  type Framework,
  HUGE_LIMIT,
  PEERS,
  type Variant,
  variantsOf,
} from '../http/variants.ts';
import {
  alternate,
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

const NAMES: Record<Framework, string> = { express: 'Express', koa: 'Koa', fastify: 'Fastify' };
const LABELS: Partial<Record<Variant, string>> = {
  bare: 'bare',
  floor: 'floor: one EVALSHA',
  sentinel: 'Sentinel',
};

interface Figures {
  rps: number;
  p99: number;
  /** Connection errors and timeouts, over all rounds. */
  errors: number;
  /** Failures Sentinel reported (a decision past the deadline, say), over all rounds. */
  failures?: number;
}

/** Starts every server of a framework, loads them in turn, round after round, then stops them. */
async function measure(
  framework: Framework,
  redisUrl: string,
  rounds: number,
  warmUp: number,
  seconds: number,
): Promise<Map<Variant, Figures>> {
  const servers: ServerProcess[] = [];
  try {
    // One at a time: starting them together would only make each start slower.
    for (const variant of variantsOf(framework)) {
      servers.push(await startServer(framework, variant, redisUrl));
    }
    const runs = await alternate<Load>(
      rounds,
      servers.map((server) => ({
        name: server.variant,
        run: () => load(server.port, warmUp, seconds),
      })),
    );
    const failures = await Promise.all(servers.map((server) => server.stop()));
    const figures = new Map<Variant, Figures>();
    for (const [i, server] of servers.entries()) {
      const loads = runs.get(server.variant) ?? [];
      figures.set(server.variant, {
        rps: median(loads.map((l) => l.rps)),
        p99: median(loads.map((l) => l.p99)),
        errors: loads.reduce((sum, l) => sum + l.errors, 0),
        ...(server.variant === 'sentinel' && { failures: failures[i] }),
      });
    }
    return figures;
  } finally {
    await Promise.all(servers.map((server) => server.stop()));
  }
}

/** The rows, bars, targets and notes of one framework. */
function judge(framework: Framework, figures: Map<Variant, Figures>, into: Findings): void {
  const name = NAMES[framework];
  const rps = (variant: Variant) => figures.get(variant)?.rps ?? Number.NaN;
  const bare = rps('bare');
  const floor = rps('floor');
  const sentinel = rps('sentinel');
  for (const [variant, { rps: r, p99 }] of figures) {
    into.rows.push([
      name,
      LABELS[variant] ?? variant,
      rate(r),
      ms(p99),
      (r / bare).toFixed(2),
      variant === 'bare' || variant === 'floor' ? '' : (r / floor).toFixed(2),
    ]);
  }
  into.ratios.push({
    label: `${name}: Sentinel ÷ floor`,
    value: sentinel / floor,
    goal: FLOOR_GOAL,
  });
  into.targets.push({
    goal: `${name}: Sentinel keeps at least ${FLOOR_GOAL}× the one-call floor's throughput`,
    figure: `${rate(sentinel)} req/s against the floor's ${rate(floor)}: ${times(sentinel / floor)}`,
    met: sentinel / floor >= FLOOR_GOAL,
  });
  for (const peer of PEERS[framework]) {
    const peerRps = rps(peer);
    // Both shares are of the same bare figure, so their ratio is that of the req/s.
    into.ratios.push({
      label: `${name}: Sentinel's share of bare ÷ ${peer}'s`,
      value: sentinel / peerRps,
      goal: 1,
    });
    into.targets.push({
      goal: `${name}: Sentinel keeps more of the bare throughput than ${peer}`,
      figure: `Sentinel ${(sentinel / bare).toFixed(2)} of bare, ${peer} ${(peerRps / bare).toFixed(2)}: ${times(sentinel / peerRps)}`,
      met: sentinel > peerRps,
    });
  }
  into.notes.push(
    `${name} toward ${BARE_SHARE_AIM}× of bare: Sentinel keeps ${(sentinel / bare).toFixed(2)}, ` +
      `${Math.round((100 * sentinel) / bare / BARE_SHARE_AIM)}% of the way; the one-call floor ` +
      `keeps ${(floor / bare).toFixed(2)}, so one call per request alone leaves ` +
      `${Math.max(0, BARE_SHARE_AIM - floor / bare).toFixed(2)} of bare to win by batching or the block cache.`,
  );
  const failures = figures.get('sentinel')?.failures;
  if (failures !== 0) {
    into.notes.push(
      `${name}: Sentinel reported ${failures ?? 'an unknown number of'} failures, each a decision taken without Redis's answer (past the deadline, or with the breaker open), which answers sooner than a counted one and flatters its figures.`,
    );
  }
  const errors = [...figures].filter(([, f]) => f.errors > 0);
  if (errors.length) {
    into.notes.push(
      `${name}: connection errors or timeouts: ${errors.map(([v, f]) => `${v} ${f.errors}`).join(', ')}.`,
    );
  }
}

interface Findings {
  rows: string[][];
  ratios: Ratio[];
  targets: Target[];
  notes: string[];
}

function report(results: Map<Framework, Map<Variant, Figures>>): SuiteReport {
  const findings: Findings = { rows: [], ratios: [], targets: [], notes: [] };
  for (const [framework, figures] of results) judge(framework, figures, findings);
  findings.notes.push(
    `Identity: every connection sends its own \`x-api-key\` (${CONNECTIONS} keys), which the floor keys its call by; Sentinel's default, \`byIp()\`, counts by client IP, since nothing confirms a key, and so do the peers by default: all their requests share one key.`,
    'Sentinel runs with its defaults plus an `onError` that only counts failures, so that a decision taken without Redis cannot pass unseen.',
    "Redis, the server and autocannon share the machine: every Redis call costs the server a socket write (the largest single item in a CPU profile of the floor's server and of Sentinel's) and Redis its CPU, on the cores the framework needs. The floor's share of bare is the most that one call per request can keep here.",
  );
  return {
    title: 'HTTP: requests per second, Express, Koa and Fastify',
    method:
      `autocannon (${CONNECTIONS} keep-alive connections) against each contender in a server process of its own, ` +
      'answering `GET /` with a tiny JSON body: the bare framework; the floor, one EVALSHA of a script that calls TIME, GET and SET PX through ioredis; ' +
      "Sentinel's adapter with default options and `redisUrl`; and the framework's usual peers on Redis (express-rate-limit with rate-limit-redis, and rate-limiter-flexible, on Express; koa-ratelimit on Koa; @fastify/rate-limit on Fastify). " +
      `Every limit is ${HUGE_LIMIT.toLocaleString('en-US')} a minute, so nothing is refused and each request does the full work. ` +
      "The servers of one framework take turns, each after a short warm-up, round after round; req/s and p99 are medians over the rounds, and a share is a limiter's req/s over bare's (or the floor's) in the same run.",
    columns: ['framework', 'contender', 'req/s', 'p99', 'share of bare', 'share of floor'],
    ...findings,
  };
}

export const http: Suite = async (config) => {
  const warmUp = config.smoke ? 0.1 : Math.min(1, config.seconds / 2);
  const seconds = config.smoke ? 0.2 : config.seconds;
  const rounds = config.smoke ? 1 : config.rounds;
  const redis = await startRedis();
  try {
    const results = new Map<Framework, Map<Variant, Figures>>();
    for (const framework of FRAMEWORKS) {
      results.set(framework, await measure(framework, redis.url, rounds, warmUp, seconds));
    }
    return report(results);
  } finally {
    await redis.stop();
  }
};
