// Memory-store contenders in one process, taking turns, under each regime in order, as one
// application would meet them. Each round opens a fresh limiter per contender (Sentinel's on the
// process's shared default store, kept open from start to end as an application's limiters keep
// it, with what earlier rounds and regimes left in it), makes the untimed pass that creates every
// key, runs two full collections, and then the contenders take turns in short stretches until
// each has run its time, so that all meet the same state of the host (see STRETCH_MS). Where
// contender.ts gives each a process of its own; the heap each result reports is the process's,
// not the contender's alone.
// node --expose-gc --import tsx --import ./src/lib/published-sentinel.mjs src/memory-store/taking-turns.ts '["sentinel","rate-limiter-flexible"]' '[{"regime":"refilled","mode":"cycle","keys":10000,"ms":3000}]' 5
import { createLimiter } from '@sentinel/core';
import {
  CONTENDERS,
  type ContenderName,
  type ContenderResult,
  cycleFor,
  prepare,
  REGIMES,
  type RunSpec,
  resultOf,
} from './contender.ts';

/**
 * One turn's length. This host's speed moves between two states about 2x apart for seconds at a
 * time, the same for both contenders (bench/runs/2026-12-07-memory-store-host-states.md): in turns
 * of a whole run's length, one contender's turn could meet the fast state and the other's the
 * slow. In stretches this short every contender meets each state for about as long.
 */
const STRETCH_MS = 100;

/**
 * argv: the contenders as JSON, the runs as JSON, the rounds; prints, per run in order, each
 * contender's results in round order, as one JSON array.
 */
async function main(): Promise<void> {
  const [names, runs, rounds] = process.argv.slice(2);
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run with node --expose-gc');
  // An application holds its limiters for its whole life, so the process's shared store outlives
  // any one of them. Without this one, closing each round's limiter closed that store and the
  // next round began on a new one, whose objects V8 gave hidden classes the optimized code had not
  // seen once the old one's were collected; from about the seventh new store, Sentinel's
  // decisions ran at 0.6x (bench/runs/2026-12-06-memory-store-lifetime.md).
  const application = createLimiter({ limit: 1, window: 1000 });
  const order = JSON.parse(names as string) as ContenderName[];
  const results: Record<string, ContenderResult[]>[] = [];
  for (const spec of JSON.parse(runs as string) as RunSpec[]) {
    if (spec.mode !== 'cycle') throw new Error('taking turns runs cycle runs only');
    const figures: Record<string, ContenderResult[]> = Object.fromEntries(
      order.map((name) => [name, []]),
    );
    for (let round = 0; round < Number(rounds); round++) {
      // Every other round the other goes first, at the start and in each stretch.
      const turns = round % 2 === 0 ? order : [...order].reverse();
      const running = [];
      for (const name of turns) {
        const make = CONTENDERS[name];
        if (!make) throw new Error(`unknown contender ${name}`);
        const contender = make(REGIMES[spec.regime]);
        running.push({ name, contender, progress: await prepare(contender, spec) });
      }
      gc();
      gc();
      for (let spent = 0; spent < spec.ms; spent += STRETCH_MS) {
        const stretch = Math.min(STRETCH_MS, spec.ms - spent);
        for (const { contender, progress } of running) {
          await cycleFor(contender, spec, stretch, progress);
        }
      }
      for (const { name, contender, progress } of running) {
        figures[name]?.push(resultOf(progress, gc));
        await contender.close();
      }
    }
    results.push(figures);
  }
  await application.close();
  process.stdout.write(`${JSON.stringify(results)}\n`);
  // The shared Sentinel store's sweeper is unref'd, but exit now as contender.ts does.
  process.exit(0);
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
