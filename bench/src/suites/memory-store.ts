// Memory stores: sequential awaited decisions at 10k and 1M keys, each contender in a child process
// of its own so that the heap reported is its own, and the targets' pair again in one process
// taking turns, where a user's limiters would run; then a flood of 1M distinct keys.
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
  REGIMES,
  type Regime,
  type RunSpec,
} from '../memory-store/contender.ts';

const run = promisify(execFile);
const BENCH_DIR = fileURLToPath(new URL('../../', import.meta.url));
const SCRIPT = fileURLToPath(new URL('../memory-store/contender.ts', import.meta.url));
const TAKING_TURNS = fileURLToPath(new URL('../memory-store/taking-turns.ts', import.meta.url));
const PUBLISHED = fileURLToPath(new URL('../lib/published-sentinel.mjs', import.meta.url));
const NODE_ARGS = ['--expose-gc', '--import', 'tsx', '--import', PUBLISHED];

const LABELS: Record<ContenderName, string> = {
  sentinel: 'Sentinel, token bucket (default store)',
  'sentinel-observed': 'Sentinel, token bucket, observed by prometheusMetrics',
  'sentinel-1m': 'Sentinel, token bucket, maxKeys 1M',
  'minimal-token-bucket': 'minimal token bucket (baseline: a Map and an async function)',
  'rate-limiter-flexible': 'rate-limiter-flexible RateLimiterMemory',
  'sentinel-fixed-window': 'Sentinel, fixed window (default store)',
  'express-rate-limit': 'express-rate-limit MemoryStore (reference, fixed window)',
};
/** The targets' pair, also measured in one process taking turns. */
const PAIR = ['sentinel', 'rate-limiter-flexible'] as const;
/** The same algorithm as express-rate-limit's, beside it. */
const FIXED_WINDOW = ['sentinel-fixed-window', 'express-rate-limit'] as const;

/** Runs one contender in a process of its own: its results, one per run, in order. */
async function child(name: ContenderName, runs: readonly RunSpec[]): Promise<ContenderResult[]> {
  const { stdout } = await run(
    process.execPath,
    [...NODE_ARGS, SCRIPT, name, JSON.stringify(runs)],
    {
      cwd: BENCH_DIR,
      maxBuffer: 1 << 20,
    },
  );
  return stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as ContenderResult);
}

interface Scenario {
  readonly label: string;
  /** One run, or for `together` every regime in order, in the one process. */
  readonly runs: readonly RunSpec[];
  readonly contenders: readonly ContenderName[];
  /** All contenders in one process taking turns, rather than each in a process of its own. */
  readonly together?: boolean;
}

type Medians = Map<ContenderName, ContenderResult>;

function mediansOf(figures: Map<string, ContenderResult[]>): Medians {
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

/** Every contender of the scenario in one process, taking turns for all rounds, run after run. */
async function together(rounds: number, scenario: Scenario): Promise<Medians[]> {
  const { stdout } = await run(
    process.execPath,
    [
      ...NODE_ARGS,
      TAKING_TURNS,
      JSON.stringify(scenario.contenders),
      JSON.stringify(scenario.runs),
      String(rounds),
    ],
    { cwd: BENCH_DIR, maxBuffer: 1 << 20 },
  );
  return (JSON.parse(stdout) as Record<string, ContenderResult[]>[]).map((figures) =>
    mediansOf(new Map(Object.entries(figures))),
  );
}

/** Each contender in a fresh process per round, taking turns: heaps never mix. */
async function apart(rounds: number, scenario: Scenario): Promise<Medians[]> {
  const [spec] = scenario.runs as [RunSpec];
  const figures = await alternate(
    rounds,
    scenario.contenders.map((name) => ({
      name,
      run: async () => (await child(name, [spec]))[0] as ContenderResult,
    })),
  );
  return [mediansOf(figures)];
}

/**
 * A smoke run only checks that everything works: one process per contender runs its scenarios
 * apart in turn, and one per scenario together, all at once, so that it takes seconds.
 */
async function smoke(scenarios: readonly Scenario[]): Promise<Medians[][]> {
  const separate = scenarios.filter((s) => !s.together);
  const names = [...new Set(separate.flatMap((s) => s.contenders))];
  const medians = scenarios.map((): Medians[] => [new Map()]);
  await Promise.all([
    ...names.map(async (name) => {
      const mine = separate.filter((s) => s.contenders.includes(name));
      const figures = await child(
        name,
        mine.map((s) => s.runs[0] as RunSpec),
      );
      mine.forEach((scenario, i) => {
        medians[scenarios.indexOf(scenario)]?.[0]?.set(name, figures[i] as ContenderResult);
      });
    }),
    ...scenarios.map(async (scenario, i) => {
      if (scenario.together) medians[i] = await together(1, scenario);
    }),
  ]);
  return medians;
}

const REGIME_LABELS: Record<Regime, string> = {
  refilled: 'refilled to full between visits (10⁹ an hour)',
  holding: 'holding state (10,000 a day)',
  near: 'near the limit (100 a minute)',
};

/** One regime at one key count, measured one way: the targets' pair is in each. */
interface Measured {
  readonly regime: Regime;
  readonly keys: number;
  readonly together: boolean;
  readonly medians: Medians;
}

export async function memoryStore(config: BenchConfig): Promise<SuiteReport> {
  // A smoke run keeps the shape of every scenario with far fewer keys.
  const small = config.smoke ? 1_000 : 10_000;
  const large = config.smoke ? 20_000 : 1_000_000;
  const ms = config.seconds * 1000;
  const regimes = Object.keys(REGIMES) as Regime[];
  const cycle = (regime: Regime, keys: number): RunSpec => ({ regime, mode: 'cycle', keys, ms });
  const scenarios: Scenario[] = [];
  for (const keys of [small, large]) {
    for (const regime of regimes) {
      // Holding state, every contender; the other regimes, the targets' pair.
      const contenders: readonly ContenderName[] =
        regime !== 'holding'
          ? PAIR
          : keys === small
            ? [...PAIR, 'sentinel-observed', 'minimal-token-bucket', ...FIXED_WINDOW]
            : [...PAIR, 'sentinel-1m', ...FIXED_WINDOW];
      scenarios.push({
        label: `${rate(keys)} keys, ${REGIME_LABELS[regime]}`,
        runs: [cycle(regime, keys)],
        contenders,
      });
    }
    scenarios.push({
      label: `${rate(keys)} keys, one process`,
      runs: regimes.map((regime) => cycle(regime, keys)),
      contenders: PAIR,
      together: true,
    });
  }
  scenarios.push({
    label: `flood of ${rate(large)} distinct keys`,
    runs: [{ regime: 'holding', mode: 'flood', keys: large, ms }],
    contenders: ['sentinel', 'express-rate-limit', 'rate-limiter-flexible'],
  });
  const results: Medians[][] = [];
  if (config.smoke) results.push(...(await smoke(scenarios)));
  else {
    for (const scenario of scenarios) {
      results.push(await (scenario.together ? together : apart)(config.rounds, scenario));
    }
  }

  const perSecond = (medians: Medians, name: ContenderName) =>
    medians.get(name)?.perSecond ?? Number.NaN;
  const ratioOf = (medians: Medians, ours: ContenderName, peer: ContenderName) =>
    perSecond(medians, ours) / perSecond(medians, peer);
  const rows: string[][] = [];
  const measured: Measured[] = [];
  scenarios.forEach((scenario, i) => {
    scenario.runs.forEach((spec, j) => {
      const medians = results[i]?.[j] ?? new Map();
      if (spec.mode === 'cycle') {
        measured.push({
          regime: spec.regime,
          keys: spec.keys,
          together: scenario.together === true,
          medians,
        });
      }
      const label = scenario.together
        ? `${rate(spec.keys)} keys, ${REGIME_LABELS[spec.regime]}, one process, regimes in turn`
        : scenario.label;
      // Each row over Sentinel's token bucket, and over its fixed window where the run has it.
      const over = (ours: ContenderName, name: ContenderName) =>
        medians.has(ours) ? times(ratioOf(medians, ours, name)) : '';
      for (const name of scenario.contenders) {
        const figure = medians.get(name);
        if (!figure) continue;
        rows.push([
          label,
          LABELS[name],
          rate(figure.perSecond),
          over('sentinel', name),
          over('sentinel-fixed-window', name),
          // One process holds every contender's heap in turn: only a process of its own says whose.
          scenario.together ? '' : mb(figure.heapUsed),
          `${(figure.admitted * 100).toFixed(0)}%`,
        ]);
      }
    });
  });

  const find = (regime: Regime, keys: number, inOne: boolean) =>
    (measured.find((m) => m.regime === regime && m.keys === keys && m.together === inOne)
      ?.medians ?? new Map()) as Medians;
  const apartSmall = find('holding', small, false);
  const apartLarge = find('holding', large, false);
  const flood = results[results.length - 1]?.[0] ?? (new Map() as Medians);
  const whereOf = (m: Measured) =>
    `${rate(m.keys)} keys, ${REGIME_LABELS[m.regime]}, ${m.together ? 'one process, regimes in turn' : 'each in a process of its own'}`;
  const ratios: Ratio[] = [
    ...measured.map((m) => ({
      label: `memory, token bucket ÷ rate-limiter-flexible, ${whereOf(m)}`,
      value: ratioOf(m.medians, 'sentinel', 'rate-limiter-flexible'),
      goal: 1,
    })),
    ...[apartSmall, apartLarge].map((medians, i) => ({
      label: `memory, fixed window ÷ express-rate-limit, ${rate(i === 0 ? small : large)} keys, holding state`,
      value: ratioOf(medians, 'sentinel-fixed-window', 'express-rate-limit'),
    })),
    {
      label: `memory, ${rate(small)} keys, observed by prometheusMetrics ÷ unobserved`,
      value: ratioOf(apartSmall, 'sentinel-observed', 'sentinel'),
    },
  ];
  const floodHeap = flood.get('sentinel')?.heapUsed ?? Number.NaN;
  const targets: Target[] = [
    ...measured.map((m): Target => {
      const value = ratioOf(m.medians, 'sentinel', 'rate-limiter-flexible');
      return {
        goal: `token bucket ≥ 1.0× rate-limiter-flexible's RateLimiterMemory at ${whereOf(m)}`,
        figure: `${times(value)} (${rate(perSecond(m.medians, 'sentinel'))}/s vs ${rate(perSecond(m.medians, 'rate-limiter-flexible'))}/s)`,
        met: value >= 1,
      };
    }),
    {
      goal: `heap < 100 MB after a flood of ${rate(large)} distinct keys, default maxKeys`,
      figure: `${mb(floodHeap)} (express-rate-limit ${mb(flood.get('express-rate-limit')?.heapUsed ?? Number.NaN)}, rate-limiter-flexible ${mb(flood.get('rate-limiter-flexible')?.heapUsed ?? Number.NaN)})`,
      met: floodHeap < 100 * 2 ** 20,
    },
  ];
  const minimalRlf = ratioOf(apartSmall, 'minimal-token-bucket', 'rate-limiter-flexible');

  return {
    title: 'Memory store',
    method: `Sequential \`await\` of one decision at a time, cycling over ${rate(small)} and over ${rate(large)} keys after one untimed pass that creates them all, for ${config.seconds} s per contender and round, ${config.rounds} rounds, every other round in reverse order, under three regimes, each the same for every contender: ${REGIME_LABELS.refilled}, where every key revisited has refilled to full since, the common case of clients well under their limit; ${REGIME_LABELS.holding}, where a key revisited within 8.6 s still holds state and no decision comes near the limit; and ${REGIME_LABELS.near}, where most decisions refuse. Then a flood of ${rate(large)} distinct keys, each used once, holding state. Sentinel is \`createLimiter({ limit, window })\` with the store a user gets by default, the process's shared MemoryStore with maxKeys 100,000, running its default algorithm, the token bucket, and in a row of its own \`algorithm: 'fixed-window'\`: at ${rate(large)} keys it holds the 100k used last and evicts the rest, so every decision there creates a key. A Sentinel row passes \`new MemoryStore({ maxKeys: 1_000_000 })\` to show what holding them all costs; another, at ${rate(small)} keys, adds \`observe: prometheusMetrics(new Registry())\`, to show what observing every decision costs. The targets compare the token bucket with rate-limiter-flexible's RateLimiterMemory (\`await consume(key)\`, a refusal thrown); express-rate-limit's MemoryStore (\`await increment(key)\`) counts a fixed window, and stands beside Sentinel's fixed window as a reference, with no target. Measured two ways. Each contender in a child process of its own (\`node --expose-gc\`), a fresh one per round and regime, which reports \`process.memoryUsage().heapUsed\` after two \`gc()\` calls at the end of its run, its store still reachable (an idle process holds about 8 MB). And the targets' pair in one child process per key count (\`src/memory-store/taking-turns.ts\`), which runs the three regimes one after the other, as an application meets them, for all rounds of each: each round a fresh limiter per contender (Sentinel's on the process's shared store, which a limiter opened first and closed last keeps open, as an application's limiters keep it, with what the regimes before left in it) and the pass that creates its keys, two \`gc()\` calls, then the pair taking turns in stretches of 100 ms until each has run its time, since this host's speed moves between two states about 2x apart for seconds at a time, for both alike (bench/runs/2026-12-07-memory-store-host-states.md); rate-limiter-flexible's key timers are cleared when its round ends, since they would keep its storage alive; no heap is reported there, as the heap is no one contender's.`,
    columns: [
      'run',
      'contender',
      'decisions/s',
      'token bucket ÷',
      'fixed window ÷',
      'heap',
      'admitted',
    ],
    rows,
    ratios,
    targets,
    notes: [
      "Two ways, since each has its own artefacts: a process of its own gives each contender a clean heap and code compiled for it alone; one process, as in an application, shares the timing loop's compiled code between them, compiles each contender's code for every regime met before, and leaves each a heap the other grew, with a young generation V8 has grown from a fresh process's 8 MB semi-spaces to 16 MB, which on its own made rate-limiter-flexible 7% to 10% faster and Sentinel 1% (bench/runs/2026-12-06-memory-young-generation.md). The targets ask for 1.0× both ways, in each regime, at each key count. 'token bucket ÷' and 'fixed window ÷' are Sentinel's rate with that algorithm over the row's, same run.",
      "Refilled to full between visits: a full bucket has expired, as its Redis key would have, so each visit finds its key expired and starts it afresh. The memory store fills such a key's entry and state object in place; until 0a25391 it removed the key and filed a new one, which cost three times rate-limiter-flexible's decision here (0.3× its rate at 10k keys), where the earlier bench, holding state alone, showed 1.3×. An outside harness that ran the three regimes one after another in one process also met a second cost the bench never had: Sentinel's default store is the process's, shared by every limiter, so the keys an earlier regime's limiter left (expired, in another namespace) stayed beside each identity until the sweep, and each read walked past them; the one-process rows measure that order.",
      "rate-limiter-flexible's RateLimiterMemory counts the points of a window that starts at a key's first consume, one record and one unref'd timer per key, and answers with a fresh result object: per call a key string built with its prefix, one Map lookup, Date.now() and an increment. Sentinel's token bucket refills in fixed point, computes the time to full and the key's expiry, checks the key and cost, passes the circuit breaker and builds a Decision with its per-policy details, as for Redis. express-rate-limit's MemoryStore counts a fixed window that resets every key at once on one interval: one Map lookup, Date.now() and an increment, returning its own record; Sentinel's fixed window answers as its token bucket does, over epoch-aligned windows.",
      `The minimal token bucket is the least work that answers as Sentinel does: one async function over a Map, a refill on Date.now(), and a decision of Sentinel's fields with one policy's details; no key checks, no breaker, no expiry and no bound on its keys. At ${rate(small)} keys it made ${times(minimalRlf)} rate-limiter-flexible's rate; Sentinel made ${times(ratioOf(apartSmall, 'sentinel', 'minimal-token-bucket'))} of it, the rest being what Sentinel adds: key and cost checks, the breaker, the request kept for a refund, the eviction bookkeeping, and a Decision built as for Redis.`,
      "At 1M keys with the default maxKeys, each decision misses, evicts an identity (CLOCK, approximately LRU, as Redis `allkeys-lru`) and files a new one, whose entry and state the evicted identity hands over. The identity table is its own index, open addressing over a typed array of (hash, slot) pairs with a seeded hash, beside a ring of slots for the CLOCK hand: a miss reads one or two adjacent pairs and compares a string only on a full hash match. On a Map, whose chains cost a cache miss per entry and per key string compared, the memory store made 0.99× rate-limiter-flexible here (519k against 523k decisions/s in the full run at 38c0c98), and its misses, deletes and inserts took most of a decision; the index made that case 1.75× faster alone and the 10k case 1.1× (medians of five alternating runs of each build). What is left at 1M keys is mostly garbage collection, a third of a decision in a CPU profile: each new key's identity string stays until eviction, 100k decisions later, so it outlives young collections and dies old, where rate-limiter-flexible, holding every key, creates none in this cycle.",
      'The peers keep every key until its window ends, so their heap grows with the number of distinct keys; Sentinel evicts past maxKeys, which bounds its heap whatever the key count.',
    ],
  };
}
