// Memory-store contenders in one process, taking turns, every other round in reverse, under each
// regime in order, as one application would meet them: each turn a fresh limiter (Sentinel's on
// the process's shared default store, kept open from start to end as an application's limiters
// keep it, with what earlier turns left in it), an untimed pass that creates every key, then the
// timed run, and two full collections before the next turn, so that none runs on another's
// garbage. Where contender.ts gives each a process of its own; the heap each result
// reports is the process's, not the contender's alone.
// node --expose-gc --import tsx --import ./src/lib/published-sentinel.mjs src/memory-store/taking-turns.ts '["sentinel","rate-limiter-flexible"]' '[{"regime":"refilled","mode":"cycle","keys":10000,"ms":3000}]' 5
import { createLimiter } from '@sentinel/core';
import { alternate } from '../lib/measure.ts';
import {
  CONTENDERS,
  type ContenderName,
  type ContenderResult,
  measure,
  REGIMES,
  type RunSpec,
} from './contender.ts';

/**
 * argv: the contenders as JSON, the runs as JSON, the rounds; prints, per run in order, each
 * contender's results in round order, as one JSON array.
 */
async function main(): Promise<void> {
  const [names, runs, rounds] = process.argv.slice(2);
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run with node --expose-gc');
  // An application holds its limiters for its whole life, so the process's shared store outlives
  // any one of them. Without this one, closing each turn's limiter closed that store and the next
  // turn began on a new one, whose objects V8 gave hidden classes the optimized code had not seen
  // once the old one's were collected; from about the seventh new store, Sentinel's decisions ran
  // at 0.6x (bench/runs/2026-12-06-memory-store-lifetime.md).
  const application = createLimiter({ limit: 1, window: 1000 });
  const results: Record<string, ContenderResult[]>[] = [];
  for (const spec of JSON.parse(runs as string) as RunSpec[]) {
    const contenders = (JSON.parse(names as string) as ContenderName[]).map((name) => {
      const make = CONTENDERS[name];
      if (!make) throw new Error(`unknown contender ${name}`);
      return {
        name,
        run: async () => {
          gc();
          gc();
          const contender = make(REGIMES[spec.regime]);
          const result = await measure(contender, spec, gc);
          await contender.close();
          return result;
        },
      };
    });
    results.push(Object.fromEntries(await alternate(Number(rounds), contenders)));
  }
  await application.close();
  process.stdout.write(`${JSON.stringify(results)}\n`);
  // The shared Sentinel store's sweeper is unref'd, but exit now as contender.ts does.
  process.exit(0);
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
