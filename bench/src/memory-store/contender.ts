// One memory-store contender in a process of its own, so that its heap is its own: sequential
// awaited decisions over a set of keys, then the heap after a full collection, as one JSON line.
// node --expose-gc --import tsx --import ./src/lib/published-sentinel.mjs src/memory-store/contender.ts <contender> '[{"regime":"holding","mode":"cycle","keys":10000,"ms":3000}]'
import { createLimiter, MemoryStore as SentinelMemoryStore } from '@sentinel/core';
import { prometheusMetrics } from '@sentinel/core/prometheus';
import { MemoryStore as ErlMemoryStore, type Options } from 'express-rate-limit';
import { Registry } from 'prom-client';
import { RateLimiterMemory } from 'rate-limiter-flexible';

/** A limit and its window, as every contender of a run is given them. */
export interface Quota {
  readonly limit: number;
  readonly windowMs: number;
}

/**
 * The regimes a memory store meets, each the same for every contender, cycling over its keys:
 * - `refilled`: 10^9 an hour; every key revisited has refilled to full since, as with most
 *   clients of a real service, well under their limit. A full bucket has expired, as its Redis
 *   key would have, so each visit starts the key afresh.
 * - `holding`: 10,000 a day; a token takes 8.6 s to come back, so a key revisited within that
 *   still holds state, and no run comes near the limit.
 * - `near`: 100 a minute; the keys are at their limit, and most decisions refuse.
 */
export const REGIMES = {
  refilled: { limit: 1_000_000_000, windowMs: 3_600_000 },
  holding: { limit: 10_000, windowMs: 86_400_000 },
  near: { limit: 100, windowMs: 60_000 },
} as const satisfies Record<string, Quota>;

export type Regime = keyof typeof REGIMES;

/** What a contender reports: decisions per second and the heap once its run is over. */
export interface ContenderResult {
  readonly perSecond: number;
  readonly heapUsed: number;
  /** Admitted share of the timed decisions, to show the run measured admissions. */
  readonly admitted: number;
}

/** A contender's decision, and how to let its store go. */
export interface Contender {
  decide(key: string): Promise<boolean>;
  close(): Promise<void> | void;
}

/** What rate-limiter-flexible's RateLimiterMemory keeps, as far as closing it needs. */
interface RlfStorage {
  _storage: Map<string, { timeoutId?: NodeJS.Timeout }>;
}

export const CONTENDERS = {
  /** The default store: the process's shared MemoryStore, maxKeys 100,000. */
  sentinel: ({ limit, windowMs }: Quota): Contender => {
    const limiter = createLimiter({ limit, window: windowMs, algorithm: 'token-bucket' });
    return {
      decide: async (key) => (await limiter.consume(key)).allowed,
      close: () => limiter.close(),
    };
  },
  /** The default store, observed by the Prometheus helper: what `observe` costs a decision. */
  'sentinel-observed': ({ limit, windowMs }: Quota): Contender => {
    const limiter = createLimiter({
      limit,
      window: windowMs,
      algorithm: 'token-bucket',
      observe: prometheusMetrics(new Registry()),
    });
    return {
      decide: async (key) => (await limiter.consume(key)).allowed,
      close: () => limiter.close(),
    };
  },
  /** The default store running a fixed window: the same algorithm as express-rate-limit's. */
  'sentinel-fixed-window': ({ limit, windowMs }: Quota): Contender => {
    const limiter = createLimiter({ limit, window: windowMs, algorithm: 'fixed-window' });
    return {
      decide: async (key) => (await limiter.consume(key)).allowed,
      close: () => limiter.close(),
    };
  },
  /** The token bucket with room for a million keys, to show what holding them all costs. */
  'sentinel-1m': ({ limit, windowMs }: Quota): Contender => {
    const store = new SentinelMemoryStore({ maxKeys: 1_000_000 });
    const limiter = createLimiter({
      limit,
      window: windowMs,
      algorithm: 'token-bucket',
      store,
    });
    return {
      decide: async (key) => (await limiter.consume(key)).allowed,
      close: async () => {
        await limiter.close();
        store.close();
      },
    };
  },
  /**
   * Not a limiter anyone ships: the least a token bucket must do to answer as Sentinel does, one
   * async function over a Map that refills on Date.now() and returns a decision of Sentinel's
   * fields with one policy's details. It bounds what any limiter of that shape can reach here.
   */
  'minimal-token-bucket': ({ limit, windowMs }: Quota): Contender => {
    const buckets = new Map<string, { level: number; at: number }>();
    // Fixed point, as Sentinel's: a token is windowMs units and a millisecond adds limit.
    const capacity = limit * windowMs;
    const decide = async (key: string) => {
      const now = Date.now();
      let bucket = buckets.get(key);
      if (bucket === undefined) {
        bucket = { level: capacity, at: now };
        buckets.set(key, bucket);
      }
      const level = Math.min(capacity, bucket.level + (now - bucket.at) * limit);
      const allowed = level >= windowMs;
      bucket.level = allowed ? level - windowMs : level;
      bucket.at = now;
      const remaining = Math.floor(bucket.level / windowMs);
      const resetMs = Math.ceil((capacity - bucket.level) / limit);
      const retryAfterMs = allowed ? 0 : Math.ceil((windowMs - level) / limit);
      const policy = 'default';
      return {
        allowed,
        limit,
        remaining,
        resetMs,
        retryAfterMs,
        policy,
        policies: [
          {
            policy,
            algorithm: 'token-bucket',
            allowed,
            limit,
            windowMs,
            remaining,
            resetMs,
            retryAfterMs,
          },
        ],
      };
    };
    return {
      decide: async (key) => (await decide(key)).allowed,
      close: () => buckets.clear(),
    };
  },
  'express-rate-limit': ({ limit, windowMs }: Quota): Contender => {
    const store = new ErlMemoryStore();
    store.init({ windowMs } as Options);
    return {
      decide: async (key) => (await store.increment(key)).totalHits <= limit,
      close: () => store.shutdown(),
    };
  },
  'rate-limiter-flexible': ({ limit, windowMs }: Quota): Contender => {
    let limiter = new RateLimiterMemory({ points: limit, duration: windowMs / 1000 });
    return {
      decide: async (key) => {
        try {
          await limiter.consume(key);
          return true;
        } catch {
          return false;
        }
      },
      // It has no close, and each key's expiry timer holds its whole storage: cleared here, so
      // that a run in a process shared with other contenders leaves no heap behind.
      close: () => {
        const storage = (limiter as unknown as { _memoryStorage: RlfStorage })._memoryStorage;
        for (const record of storage._storage.values()) clearTimeout(record.timeoutId);
        storage._storage.clear();
        limiter = new RateLimiterMemory({ points: 1, duration: 1 });
      },
    };
  },
} satisfies Record<string, (quota: Quota) => Contender>;

export type ContenderName = keyof typeof CONTENDERS;

/** One run: `cycle` goes round `keys` keys for `ms` after a pass that creates them all, `flood`
 * uses `keys` distinct keys once each; every contender under the regime's quota. */
export interface RunSpec {
  readonly regime: Regime;
  readonly mode: 'cycle' | 'flood';
  readonly keys: number;
  readonly ms: number;
}

/** Where a cycling run is in its keys, and what it has counted so far. */
export interface Progress {
  next: number;
  done: number;
  admitted: number;
  /** Milliseconds spent deciding, over every stretch. */
  elapsed: number;
}

/** The untimed pass of a `cycle` run that creates every key; a fresh count to go on from. */
export async function prepare({ decide }: Contender, { keys }: RunSpec): Promise<Progress> {
  for (let i = 0; i < keys; i++) await decide(`user-${i}`);
  return { next: 0, done: 0, admitted: 0, elapsed: 0 };
}

/** Goes on cycling over the run's keys for `ms`, adding what it decided to `progress`. */
export async function cycleFor(
  { decide }: Contender,
  { keys }: RunSpec,
  ms: number,
  progress: Progress,
): Promise<void> {
  let { next, done, admitted } = progress;
  const started = performance.now();
  const until = started + ms;
  while (performance.now() < until) {
    for (let batch = 0; batch < 1024; batch++) {
      if (await decide(`user-${next}`)) admitted++;
      if (++next === keys) next = 0;
    }
    done += 1024;
  }
  progress.elapsed += performance.now() - started;
  Object.assign(progress, { next, done, admitted });
}

/** What a run counted, with the heap after two full collections (the store still reachable). */
export function resultOf(progress: Progress, gc: () => void): ContenderResult {
  gc();
  gc();
  return {
    perSecond: progress.done / (progress.elapsed / 1000),
    heapUsed: process.memoryUsage().heapUsed,
    admitted: progress.admitted / progress.done,
  };
}

export async function measure(
  contender: Contender,
  spec: RunSpec,
  gc: () => void,
): Promise<ContenderResult> {
  if (spec.mode === 'cycle') {
    const progress = await prepare(contender, spec);
    await cycleFor(contender, spec, spec.ms, progress);
    return resultOf(progress, gc);
  }
  const progress: Progress = { next: 0, done: spec.keys, admitted: 0, elapsed: 0 };
  const started = performance.now();
  for (let i = 0; i < spec.keys; i++) if (await contender.decide(`flood-${i}`)) progress.admitted++;
  progress.elapsed = performance.now() - started;
  return resultOf(progress, gc);
}

/** argv: the contender, then runs as JSON; prints one JSON result a line, in order. */
async function main(): Promise<void> {
  const [name, runs] = process.argv.slice(2);
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run with node --expose-gc');
  const make = CONTENDERS[name as ContenderName];
  if (!make) throw new Error(`unknown contender ${name}`);
  for (const spec of JSON.parse(runs as string) as RunSpec[]) {
    // A fresh store per run, so that runs in one process do not share keys.
    const contender = make(REGIMES[spec.regime]);
    const result = await measure(contender, spec, gc);
    process.stdout.write(`${JSON.stringify(result)}\n`);
    await contender.close();
  }
  // Peers' timers are unref'd, but the shared Sentinel store outlives its limiters: exit now.
  process.exit(0);
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
