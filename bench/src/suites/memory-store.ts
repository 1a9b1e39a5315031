// Memory stores: sequential awaited decisions at 10k and 1M keys, and a flood of 1M distinct keys,
// each contender in a child process of its own so that the heap reported is its own.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import {
  alternate,
  type BenchConfig,
  mb,
  median,
  type Ratio,
  rate,
  type SuiteReport,
  type Target,
  times,
} from '../lib/measure.ts';
import {
  type ContenderName,
  type ContenderResult,
  LIMIT,
  type RunSpec,
} from '../memory-store/contender.ts';

const run = promisify(execFile);
const BENCH_DIR = fileURLToPath(new URL('../../', import.meta.url));
const SCRIPT = fileURLToPath(new URL('../memory-store/contender.ts', import.meta.url));
const PUBLISHED = fileURLToPath(new URL('../lib/published-sentinel.mjs', import.meta.url));

const LABELS: Record<ContenderName, string> = {
  sentinel: 'Sentinel (default store)',
  'sentinel-observed': 'Sentinel, observed by prometheusMetrics',
  'sentinel-1m': 'Sentinel, maxKeys 1M',
  'minimal-token-bucket': 'minimal token bucket (baseline: a Map and an async function)',
  'express-rate-limit': 'express-rate-limit MemoryStore',
  'rate-limiter-flexible': 'rate-limiter-flexible RateLimiterMemory',
};
const PEERS = ['express-rate-limit', 'rate-limiter-flexible'] as const;

/** Runs one contender in a process of its own: its results, one per run, in order. */
async function child(name: ContenderName, runs: readonly RunSpec[]): Promise<ContenderResult[]> {
  const { stdout } = await run(
    process.execPath,
    ['--expose-gc', '--import', 'tsx', '--import', PUBLISHED, SCRIPT, name, JSON.stringify(runs)],
    { cwd: BENCH_DIR, maxBuffer: 1 << 20 },
  );
  return stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as ContenderResult);
}

interface Scenario {
  readonly label: string;
  readonly run: RunSpec;
  readonly contenders: readonly ContenderName[];
}

type Medians = Map<ContenderName, ContenderResult>;

/** Each contender in a fresh process per round, taking turns: heaps never mix. */
async function measure(config: BenchConfig, scenario: Scenario): Promise<Medians> {
  const figures = await alternate(
    config.rounds,
    scenario.contenders.map((name) => ({
      name,
      run: async () => (await child(name, [scenario.run]))[0] as ContenderResult,
    })),
  );
  const medians: Medians = new Map();
  for (const [name, results] of figures) {
    medians.set(name as ContenderName, {
      perSecond: median(results.map((r) => r.perSecond)),
      heapUsed: median(results.map((r) => r.heapUsed)),
      admitted: median(results.map((r) => r.admitted)),
    });
  }
  return medians;
}

/**
 * A smoke run only checks that everything works: one process per contender runs its scenarios
 * in turn, all contenders at once, so that it takes seconds rather than a process per figure.
 */
async function smoke(scenarios: readonly Scenario[]): Promise<Medians[]> {
  const names = [...new Set(scenarios.flatMap((s) => s.contenders))];
  const results = await Promise.all(
    names.map(async (name) => {
      const mine = scenarios.filter((s) => s.contenders.includes(name));
      const figures = await child(
        name,
        mine.map((s) => s.run),
      );
      return { name, mine, figures };
    }),
  );
  const medians = scenarios.map((): Medians => new Map());
  for (const { name, mine, figures } of results) {
    mine.forEach((scenario, i) => {
      medians[scenarios.indexOf(scenario)]?.set(name, figures[i] as ContenderResult);
    });
  }
  return medians;
}

export async function memoryStore(config: BenchConfig): Promise<SuiteReport> {
  // A smoke run keeps the shape of every scenario with far fewer keys.
  const small = config.smoke ? 1_000 : 10_000;
  const large = config.smoke ? 20_000 : 1_000_000;
  const ms = config.seconds * 1000;
  const scenarios: Scenario[] = [
    {
      label: `${rate(small)} keys`,
      run: { mode: 'cycle', keys: small, ms },
      contenders: ['sentinel', 'sentinel-observed', 'minimal-token-bucket', ...PEERS],
    },
    {
      label: `${rate(large)} keys`,
      run: { mode: 'cycle', keys: large, ms },
      contenders: ['sentinel', 'sentinel-1m', ...PEERS],
    },
    {
      label: `flood of ${rate(large)} distinct keys`,
      run: { mode: 'flood', keys: large, ms },
      contenders: ['sentinel', ...PEERS],
    },
  ];
  const results: Medians[] = [];
  if (config.smoke) results.push(...(await smoke(scenarios)));
  else for (const scenario of scenarios) results.push(await measure(config, scenario));

  const rows: string[][] = [];
  const ratios: Ratio[] = [];
  scenarios.forEach((scenario, i) => {
    const medians = results[i] as Medians;
    const ours = medians.get('sentinel')?.perSecond ?? Number.NaN;
    for (const name of scenario.contenders) {
      const figure = medians.get(name);
      if (!figure) continue;
      rows.push([
        scenario.label,
        LABELS[name],
        rate(figure.perSecond),
        name === 'sentinel' ? '1.00×' : times(ours / figure.perSecond),
        mb(figure.heapUsed),
        `${(figure.admitted * 100).toFixed(0)}%`,
      ]);
    }
  });

  const [atSmall, atLarge, flood] = results as [Medians, Medians, Medians];
  const ratioOf = (medians: Medians, peer: ContenderName) =>
    (medians.get('sentinel')?.perSecond ?? Number.NaN) /
    (medians.get(peer)?.perSecond ?? Number.NaN);
  const smallErl = ratioOf(atSmall, 'express-rate-limit');
  const largeErl = ratioOf(atLarge, 'express-rate-limit');
  ratios.push(
    { label: `memory, ${rate(small)} keys ÷ express-rate-limit`, value: smallErl, goal: 1 },
    {
      label: `memory, ${rate(small)} keys ÷ rate-limiter-flexible`,
      value: ratioOf(atSmall, 'rate-limiter-flexible'),
    },
    { label: `memory, ${rate(large)} keys ÷ express-rate-limit`, value: largeErl, goal: 2 },
    {
      label: `memory, ${rate(large)} keys ÷ rate-limiter-flexible`,
      value: ratioOf(atLarge, 'rate-limiter-flexible'),
    },
  );
  ratios.push({
    label: `memory, ${rate(small)} keys, observed by prometheusMetrics ÷ unobserved`,
    value: 1 / ratioOf(atSmall, 'sentinel-observed'),
  });
  const minimalErl =
    ratioOf(atSmall, 'express-rate-limit') / ratioOf(atSmall, 'minimal-token-bucket');
  const floodHeap = flood.get('sentinel')?.heapUsed ?? Number.NaN;
  const targets: Target[] = [
    {
      goal: `≥ 1.0× express-rate-limit's MemoryStore at ${rate(small)} keys, running a token bucket`,
      figure: `${times(smallErl)} (${rate(atSmall.get('sentinel')?.perSecond ?? Number.NaN)}/s vs ${rate(atSmall.get('express-rate-limit')?.perSecond ?? Number.NaN)}/s)`,
      met: smallErl >= 1,
    },
    {
      goal: `≥ 2× express-rate-limit's MemoryStore at ${rate(large)} keys`,
      figure: `${times(largeErl)} (${rate(atLarge.get('sentinel')?.perSecond ?? Number.NaN)}/s vs ${rate(atLarge.get('express-rate-limit')?.perSecond ?? Number.NaN)}/s)`,
      met: largeErl >= 2,
    },
    {
      goal: `heap < 100 MB after a flood of ${rate(large)} distinct keys, default maxKeys`,
      figure: `${mb(floodHeap)} (express-rate-limit ${mb(flood.get('express-rate-limit')?.heapUsed ?? Number.NaN)}, rate-limiter-flexible ${mb(flood.get('rate-limiter-flexible')?.heapUsed ?? Number.NaN)})`,
      met: floodHeap < 100 * 2 ** 20,
    },
  ];

  return {
    title: 'Memory store',
    method: `Sequential \`await\` of one decision at a time, cycling over ${rate(small)} and over ${rate(large)} keys after one untimed pass that creates them all, for ${config.seconds} s per contender and round, ${config.rounds} rounds alternating; then a flood of ${rate(large)} distinct keys, each used once. Sentinel is \`createLimiter({ limit: ${LIMIT}, window: '1d', algorithm: 'token-bucket' })\` with the store a user gets by default, the process's shared MemoryStore with maxKeys 100,000: at ${rate(large)} keys it holds the 100k used last and evicts the rest, so every decision there creates a key. A second Sentinel row passes \`new MemoryStore({ maxKeys: 1_000_000 })\` to show what holding them all costs; another, at ${rate(small)} keys, adds \`observe: prometheusMetrics(new Registry())\`, to show what observing every decision costs. The peers are express-rate-limit's MemoryStore (\`await increment(key)\`, a fixed-window counter) and rate-limiter-flexible's RateLimiterMemory (\`await consume(key)\`), with the same limit and window, which no run comes near: every decision admits. Each contender runs in a child process of its own (\`node --expose-gc\`), a fresh one per round, and reports \`process.memoryUsage().heapUsed\` after two \`gc()\` calls at the end of its run, its store still reachable; an idle process holds about 8 MB.`,
    columns: ['run', 'contender', 'decisions/s', 'Sentinel ÷', 'heap', 'admitted'],
    rows,
    ratios,
    targets,
    notes: [
      "express-rate-limit counts a fixed window: per call, one Map lookup, one Date.now() and an increment, returning its own record. Sentinel runs a token bucket (fixed-point refill, time to full, expiry), checks the key and cost, passes the circuit breaker, and builds a fresh Decision with its per-policy details, as it does for Redis; the lookup and Date.now() are the same as the peer's, the rest is the difference.",
      `The minimal token bucket is the least work that answers as Sentinel does: one async function over a Map, a refill on Date.now(), and a decision of Sentinel's fields with one policy's details; no key checks, no breaker, no expiry and no bound on its keys. At ${rate(small)} keys it made ${times(minimalErl)} express-rate-limit's rate, which bounds what any limiter answering that way can reach against that target; Sentinel made ${times(ratioOf(atSmall, 'minimal-token-bucket'))} of it, the rest being what Sentinel adds: key and cost checks, the breaker, the request kept for a refund, the eviction bookkeeping, and a Decision built as for Redis.`,
      'Profile (`node --cpu-prof`), 10k keys: the Map lookup of the identity and Date.now() take a third of a decision; the limiter layer (checks, breaker, promise) and the decision objects most of the rest. Building and hashing the 45-character store key per call used to cost more than everything else; the memory store now files keys by identity and never builds them.',
      'At 1M keys with the default maxKeys, each decision misses the Map and evicts an identity (CLOCK, approximately LRU, as Redis `allkeys-lru`), whose entry and state the new key takes over: misses, deletes and inserts on a Map of 100k entries dominate, and the key strings, which die old. What would move it: a larger maxKeys, which the second Sentinel row shows at the cost of the heap.',
      'The peers keep every key until its window ends, so their heap grows with the number of distinct keys; Sentinel evicts past maxKeys, which bounds its heap whatever the key count.',
    ],
  };
}
