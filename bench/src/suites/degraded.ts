// Decision latency while Redis fails: paused (SIGSTOP), where the deadline answers, and down,
// where the circuit breaker does; Sentinel beside rate-limiter-flexible's insurance limiter, its
// own timeout wrapper, and the plain timeout a user would put around it.
import { once } from 'node:events';
import { createHistogram, type RecordableHistogram } from 'node:perf_hooks';
import { setImmediate, setTimeout as sleep } from 'node:timers/promises';
import {
  createLimiter,
  LIMITER_CLIENT_OPTIONS,
  type Limiter,
  type SentinelErrorCode,
} from '@sentinel/core';
import { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RLWrapperTimeouts } from 'rate-limiter-flexible';
import {
  alternate,
  type BenchConfig,
  type Contender,
  median,
  ms,
  type Ratio,
  type SuiteReport,
  type Target,
  times,
} from '../lib/measure.ts';
import { type BenchRedis, startRedis } from '../lib/redis-server.ts';

const LIMIT = 1_000_000;
const WINDOW = '1h';
const KEYS = 1_000;
/** Sentinel's default `timeout`, which rate-limiter-flexible's timeout wrappers are given too. */
const TIMEOUT = 50;
/** What a paused Redis may cost beyond the deadline: timers wake late on a loaded machine. */
const SLACK = 10;
/** How long a peer with no timeout of its own is waited for before it counts as hung. */
const HANG_CAP = 10 * TIMEOUT;
/** p99 budget of a decision while the breaker is open. */
const OPEN_BUDGET = 2;
const IN_FLIGHT = [1, 32] as const;

/** How one call was answered. */
type Answer = 'redis' | 'degraded' | 'insurance' | 'timed out' | 'hung';

interface Sample {
  /** Every call's latency, in nanoseconds. */
  readonly latencies: RecordableHistogram;
  /** The calls that waited for the deadline, longer than half the timeout, in ms. */
  readonly waited: number[];
  readonly answers: Map<Answer, number>;
}

/** Runs `decide` with `inFlight` calls outstanding for `ms`, timing each call. */
async function sample(
  inFlight: number,
  ms: number,
  decide: (key: string) => Promise<Answer>,
): Promise<Sample> {
  // A histogram, not an array: the breaker answers millions of calls a round, and each time an
  // array of their latencies grew, copying it stalled the event loop 20 to 35 ms, which the
  // call then waiting on its deadline timer would have been charged for.
  const latencies = createHistogram();
  const waited: number[] = [];
  const answers = new Map<Answer, number>();
  const until = performance.now() + ms;
  let next = 0;
  const worker = async (): Promise<void> => {
    // At least one call each, so a peer that hangs still shows it.
    do {
      const started = performance.now();
      const answer = await decide(`k${next++ % KEYS}`);
      const took = performance.now() - started;
      latencies.record(Math.max(1, Math.round(took * 1e6)));
      if (took > TIMEOUT / 2) waited.push(took);
      answers.set(answer, (answers.get(answer) ?? 0) + 1);
      // Requests reach a server one turn of the event loop apart. A loop of calls that resolve
      // at once (the breaker's answers) would otherwise never let timers or replies be read, and
      // a call in flight could only give up once the loop ended: that measures the harness.
      await setImmediate();
    } while (performance.now() < until);
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  return { latencies, waited, answers };
}

// --- The contenders ------------------------------------------------------------------------------

interface Entrant {
  readonly name: string;
  decide(key: string): Promise<Answer>;
  /** Waits until calls left over from a failure have settled. */
  settle(): Promise<void>;
  close(): Promise<void>;
}

function sentinel(name: string, limiter: Limiter): Entrant {
  return {
    name,
    decide: async (key) => ((await limiter.consume(key)).degraded ? 'degraded' : 'redis'),
    // Until Redis decides again: the breaker has closed and the limiter is back in service.
    async settle() {
      for (const until = performance.now() + 5_000; performance.now() < until; ) {
        if ((await limiter.consume('settle')).degraded === undefined) return;
        await sleep(20);
      }
      throw new Error(`${name} did not recover within 5 s of Redis coming back`);
    },
    close: () => limiter.close(),
  };
}

async function peerClient(url: string): Promise<Redis> {
  // The settings of Sentinel's own client: above all no offline queue, so a lost connection
  // fails a call at once rather than queueing it.
  const client = new Redis(url, LIMITER_CLIENT_OPTIONS);
  client.on('error', () => {});
  if (client.status !== 'ready') await once(client, 'ready');
  return client;
}

/**
 * How a rate-limiter-flexible call is given up on: its own `RLWrapperTimeouts` (answered by the
 * insurance limiter), or the plain wrapper a user writes around any call that may hang, a
 * `Promise.race` with a TIMEOUT timer (answered by the application, say by letting it through).
 */
type Wrapper = 'RLWrapperTimeouts' | 'Promise.race';

/**
 * rate-limiter-flexible as its documentation sets it up for a failing Redis, a memory limiter as
 * insurance, and optionally a wrapper that gives up on a silent Redis. Without one a call waits
 * as long as Redis does, so it is capped at HANG_CAP here.
 */
async function rateLimiterFlexible(url: string, wrapper?: Wrapper): Promise<Entrant> {
  const client = await peerClient(url);
  const insuranceLimiter = new RateLimiterMemory({ points: LIMIT, duration: 3_600 });
  const store = new RateLimiterRedis({
    storeClient: client,
    useRedisPackage: false,
    points: LIMIT,
    duration: 3_600,
    insuranceLimiter,
  });
  const limiter =
    wrapper === 'RLWrapperTimeouts'
      ? new RLWrapperTimeouts({ limiter: store, timeoutMs: TIMEOUT, insuranceLimiter })
      : store;
  // The plain wrapper and the bench's cap on a hung call are the same race, at different times.
  const [cap, capped]: [number, Answer] =
    wrapper === 'Promise.race' ? [TIMEOUT, 'timed out'] : [HANG_CAP, 'hung'];
  const inFlight = new Set<Promise<unknown>>();
  // The insurance limiter answers without saying so: it notes the keys it was asked about.
  const insured = new Map<string, number>();
  const consume = insuranceLimiter.consume.bind(insuranceLimiter);
  insuranceLimiter.consume = (key, ...rest) => {
    insured.set(String(key), (insured.get(String(key)) ?? 0) + 1);
    return consume(key, ...rest);
  };
  const answeredByInsurance = (key: string): boolean => {
    const count = insured.get(key) ?? 0;
    if (count > 1) insured.set(key, count - 1);
    else insured.delete(key);
    return count > 0;
  };
  return {
    name: wrapper
      ? `rate-limiter-flexible, insurance + ${wrapper} ${TIMEOUT} ms`
      : 'rate-limiter-flexible, insurance',
    async decide(key) {
      const call = limiter.consume(key).catch(() => undefined);
      inFlight.add(call);
      void call.then(() => inFlight.delete(call));
      const gaveUp = Symbol('gave up');
      let timer: NodeJS.Timeout | undefined;
      const outcome = await Promise.race([
        call,
        new Promise((resolve) => {
          timer = setTimeout(resolve, cap, gaveUp);
        }),
      ]);
      clearTimeout(timer);
      if (outcome === gaveUp) return capped;
      return answeredByInsurance(key) ? 'insurance' : 'redis';
    },
    async settle() {
      await Promise.all(inFlight);
    },
    // Not quit(): with Redis gone it rejects, and the client goes on reconnecting for ever.
    close: async () => client.disconnect(),
  };
}

// --- The suite -----------------------------------------------------------------------------------

interface Figures {
  readonly calls: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
  readonly answers: Map<Answer, number>;
  /** The calls that waited for the deadline: longer than half the timeout. */
  readonly waited: number[];
}

const largest = (values: readonly number[]): number => values.reduce((a, b) => Math.max(a, b), 0);
const smallest = (values: readonly number[]): number =>
  values.reduce((a, b) => Math.min(a, b), Number.POSITIVE_INFINITY);
/** A histogram's value in ms: it records nanoseconds. */
const inMs = (ns: number): number => ns / 1e6;

function figures(rounds: readonly Sample[]): Figures {
  const answers = new Map<Answer, number>();
  for (const round of rounds)
    for (const [answer, count] of round.answers)
      answers.set(answer, (answers.get(answer) ?? 0) + count);
  return {
    calls: rounds.reduce((sum, r) => sum + r.latencies.count, 0),
    p50: median(rounds.map((r) => inMs(r.latencies.percentile(50)))),
    p99: median(rounds.map((r) => inMs(r.latencies.percentile(99)))),
    max: rounds.reduce((most, r) => Math.max(most, inMs(r.latencies.max)), 0),
    answers,
    waited: rounds.flatMap((r) => r.waited),
  };
}

const label = (name: string, inFlight: number): string => `${name}, ${inFlight} in flight`;

function contenders(
  entrants: readonly Entrant[],
  ms: number,
  around: (entrant: Entrant, measure: () => Promise<Sample>) => Promise<Sample>,
): Contender<Sample>[] {
  return entrants.flatMap((entrant) =>
    IN_FLIGHT.map((inFlight) => ({
      name: label(entrant.name, inFlight),
      run: () => around(entrant, () => sample(inFlight, ms, entrant.decide)),
    })),
  );
}

async function warm(entrants: readonly Entrant[]): Promise<void> {
  for (const entrant of entrants) {
    for (let i = 0; i < 100; i++) {
      if ((await entrant.decide(`k${i}`)) !== 'redis') throw new Error(`${entrant.name} is not up`);
    }
  }
}

/** Redis paused: each contender's turn pauses it, and resumes it before the next. */
async function paused(
  redis: BenchRedis,
  config: BenchConfig,
  onError: (error: { code: SentinelErrorCode }) => void,
): Promise<{ entrants: Entrant[]; results: Map<string, Sample[]> }> {
  const entrants = [
    sentinel(
      'Sentinel',
      createLimiter({ redisUrl: redis.url, limit: LIMIT, window: WINDOW, onError }),
    ),
    sentinel(
      'Sentinel, breaker: false',
      createLimiter({ redisUrl: redis.url, limit: LIMIT, window: WINDOW, onError, breaker: false }),
    ),
    await rateLimiterFlexible(redis.url, 'RLWrapperTimeouts'),
    await rateLimiterFlexible(redis.url, 'Promise.race'),
    await rateLimiterFlexible(redis.url),
  ];
  try {
    await warm(entrants);
    const results = await alternate(
      config.rounds,
      contenders(entrants, config.seconds * 1000, async (entrant, measure) => {
        redis.pause();
        try {
          return await measure();
        } finally {
          redis.resume();
          await entrant.settle();
        }
      }),
    );
    return { entrants, results };
  } finally {
    redis.resume();
    for (const entrant of entrants) await entrant.close().catch(() => {});
  }
}

/** Redis stopped, once the breaker has opened: decisions come back degraded at once. */
async function down(
  redis: BenchRedis,
  stop: () => Promise<void>,
  config: BenchConfig,
  onError: (error: { code: SentinelErrorCode }) => void,
): Promise<{ entrants: Entrant[]; results: Map<string, Sample[]> }> {
  const entrants = [
    sentinel(
      'Sentinel',
      createLimiter({ redisUrl: redis.url, limit: LIMIT, window: WINDOW, onError }),
    ),
    await rateLimiterFlexible(redis.url),
  ];
  try {
    await warm(entrants);
    await stop();
    await untilFastAndDegraded(entrants);
    const results = await alternate(
      config.rounds,
      contenders(entrants, config.seconds * 1000, (_, measure) => measure()),
    );
    return { entrants, results };
  } finally {
    for (const entrant of entrants) await entrant.close().catch(() => {});
  }
}

/** Until twenty calls in a row of each entrant come back in under 1 ms, not from Redis. */
async function untilFastAndDegraded(entrants: readonly Entrant[]): Promise<void> {
  for (const entrant of entrants) {
    let fast = 0;
    for (const until = performance.now() + 5_000; fast < 20; ) {
      if (performance.now() > until)
        throw new Error(`${entrant.name} did not fail fast within 5 s`);
      const started = performance.now();
      const answer = await entrant.decide('probe');
      fast = answer !== 'redis' && performance.now() - started < 1 ? fast + 1 : 0;
      if (fast === 0) await sleep(10);
    }
  }
}

export const degraded = async (config: BenchConfig): Promise<SuiteReport> => {
  const errors = new Map<SentinelErrorCode, number>();
  const onError = ({ code }: { code: SentinelErrorCode }): void =>
    void errors.set(code, (errors.get(code) ?? 0) + 1);
  const redis = await startRedis();
  // The down phase stops Redis itself; stopping twice would wait for a second exit.
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => (stopping ??= redis.stop());
  try {
    const pausedRun = await paused(redis, config, onError);
    const pausedErrors = new Map(errors);
    errors.clear();
    const downRun = await down(redis, stop, config, onError);
    return report(config, pausedRun, downRun, pausedErrors, errors);
  } finally {
    await stop();
  }
};

interface Run {
  readonly entrants: readonly Entrant[];
  readonly results: Map<string, Sample[]>;
}

function answered(answers: Map<Answer, number>): string {
  return [...answers].map(([answer, count]) => `${answer} ${count}`).join(', ');
}

function codes(errors: Map<SentinelErrorCode, number>): string {
  return [...errors].map(([code, count]) => `${code} ×${count}`).join(', ') || 'none';
}

function report(
  config: BenchConfig,
  pausedRun: Run,
  downRun: Run,
  pausedErrors: Map<SentinelErrorCode, number>,
  downErrors: Map<SentinelErrorCode, number>,
): SuiteReport {
  const of = (run: Run, name: string, inFlight: number): Figures =>
    figures(run.results.get(label(name, inFlight)) ?? []);
  const rows = (condition: string, run: Run): string[][] =>
    run.entrants.flatMap(({ name }) =>
      IN_FLIGHT.map((inFlight) => {
        const f = of(run, name, inFlight);
        return [
          condition,
          name,
          String(inFlight),
          String(f.calls),
          ms(f.p50),
          ms(f.p99),
          ms(f.max),
          answered(f.answers),
        ];
      }),
    );

  const open = IN_FLIGHT.map((inFlight) => ({ inFlight, ...of(downRun, 'Sentinel', inFlight) }));
  const openP99 = Math.max(...open.map((f) => f.p99));
  const allDegraded = open.every((f) => f.answers.size === 1 && f.answers.has('degraded'));
  const stalled = IN_FLIGHT.map((inFlight) => ({
    inFlight,
    ...of(pausedRun, 'Sentinel', inFlight),
  }));
  const slowest = Math.max(...stalled.map((f) => f.max));
  const peerSlowest = (wrapper: Wrapper): number => {
    const name = `rate-limiter-flexible, insurance + ${wrapper} ${TIMEOUT} ms`;
    return Math.max(...IN_FLIGHT.map((n) => of(pausedRun, name, n).max));
  };
  const raceSlowest = peerSlowest('Promise.race');
  const ceiling = TIMEOUT + SLACK;

  const targets: Target[] = [
    {
      goal: `breaker open (Redis down): decision p99 at most ${OPEN_BUDGET} ms`,
      figure:
        open.map((f) => `p99 ${ms(f.p99)} at ${f.inFlight} in flight`).join(', ') +
        (allDegraded
          ? ', every call answered degraded'
          : ', but not every call was answered degraded'),
      met: openP99 <= OPEN_BUDGET && allDegraded,
    },
    {
      goal: `Redis paused: no decision slower than the deadline plus ${SLACK} ms (${TIMEOUT} + ${SLACK} = ${ceiling} ms)`,
      figure: stalled
        .map((f) => `max ${ms(f.max)}, p99 ${ms(f.p99)} at ${f.inFlight} in flight`)
        .join('; '),
      met: slowest <= ceiling,
    },
    {
      goal: `Redis paused: no decision slower than the slowest of rate-limiter-flexible in a plain ${TIMEOUT} ms \`Promise.race\`, same run`,
      figure: `Sentinel ${ms(slowest)}, rate-limiter-flexible ${ms(raceSlowest)} (${times(raceSlowest / slowest)})`,
      met: slowest <= raceSlowest,
    },
  ];
  const ratios: Ratio[] = [
    {
      label: `paused: (deadline + ${SLACK} ms) ÷ slowest decision`,
      value: ceiling / slowest,
      goal: 1,
    },
    {
      label: `paused, slowest: rate-limiter-flexible in a ${TIMEOUT} ms Promise.race ÷ Sentinel`,
      value: raceSlowest / slowest,
      goal: 1,
    },
    {
      label: `paused, slowest: rate-limiter-flexible with RLWrapperTimeouts ${TIMEOUT} ms ÷ Sentinel`,
      value: peerSlowest('RLWrapperTimeouts') / slowest,
    },
  ];
  const waitedNote = (name: string): string =>
    IN_FLIGHT.map((inFlight) => {
      const { waited, calls } = of(pausedRun, name, inFlight);
      return (
        `${inFlight} in flight: ${waited.length} of ${calls} calls waited for the deadline (min ${ms(smallest(waited))}, ` +
        `median ${ms(median(waited))}, max ${ms(largest(waited))})`
      );
    }).join('; ');

  return {
    title: 'Degraded mode',
    method:
      `Per-call latency of \`consume\` with 1 and ${IN_FLIGHT[1]} calls in flight, ` +
      `${config.seconds} s per contender per round, ${config.rounds} rounds taking turns; p50 and ` +
      'p99 are medians over the rounds, max is the slowest call of all. Each call is recorded in a ' +
      '`perf_hooks` histogram (3 significant digits; the max exact), which never grows: an array ' +
      "of the open breaker's millions of latencies stalled the event loop 20 to 35 ms each time it " +
      'grew, and a call waiting on its deadline timer was charged for it. Sentinel is ' +
      `\`createLimiter({ redisUrl, limit, window })\` with default options (\`timeout\` ${TIMEOUT} ms, ` +
      'breaker 3 failures, 1 s cool-down), plus an `onError` that counts the codes. **Paused**: ' +
      'each turn sends SIGSTOP to redis-server, measures, then resumes it and waits until the ' +
      'contender decides on Redis again; a second Sentinel with `breaker: false` waits the deadline ' +
      'on every call. **Down**: redis-server is killed after a warm-up, and measuring starts once ' +
      'twenty calls in a row come back in under 1 ms without Redis (the breaker is open). The peer ' +
      "is rate-limiter-flexible's `RateLimiterRedis` with a `RateLimiterMemory` insurance limiter, " +
      `on an ioredis client with \`LIMITER_CLIENT_OPTIONS\`; paused, it also runs wrapped in its ` +
      `own \`RLWrapperTimeouts\` with \`timeoutMs\` ${TIMEOUT}, and in the plain wrapper a user ` +
      `writes, \`Promise.race\` of the call and a ${TIMEOUT} ms \`setTimeout\`, cleared if the ` +
      `call wins. Unwrapped, a call still unanswered after ${HANG_CAP} ms counts as hung and the ` +
      'bench stops waiting for it.',
    columns: ['Redis', 'contender', 'in flight', 'calls', 'p50', 'p99', 'max', 'answered by'],
    rows: [...rows('paused', pausedRun), ...rows('down', downRun)],
    ratios,
    targets,
    notes: [
      `Paused, Sentinel with its breaker: ${waitedNote('Sentinel')}. The rest were answered by the open breaker.`,
      `Paused, Sentinel with \`breaker: false\` (every call meets the deadline): ${waitedNote('Sentinel, breaker: false')}.`,
      `Why a paused Redis can cost more than ${TIMEOUT} ms: a call plans to give up 2 ms before ` +
        'the timeout, once Redis has been silent that long, when the timer set for the first call ' +
        'that may give up wakes (on whole milliseconds, and later on a loaded machine, as the ' +
        "peer's own timeout wrapper shows), confirmed one loop turn later; silence counts only " +
        'while the process waits for I/O, so a process kept busy waits longer; and the deadline ' +
        'stretches up to 2 × timeout while Redis has lately been slow to answer. ' +
        '[Failure modes](../docs/failure-modes.md) gives 48 to 50 ms for the default with the ' +
        `process otherwise idle; the slowest here was ${ms(slowest)} ` +
        `(${times(slowest / TIMEOUT)} the timeout).`,
      `rate-limiter-flexible without a timeout wrapper waits as long as Redis is paused (calls ` +
        `counted as hung after ${HANG_CAP} ms), and those calls then count against the quota when ` +
        'Redis resumes. Wrapped, by `RLWrapperTimeouts` (answered by the insurance limiter) or by ' +
        '`Promise.race`, the caller is answered after the timeout, but the command stays queued ' +
        "and still runs when Redis resumes; Sentinel's calls carry an expiry, so Redis ignores them.",
      'Both paused targets were met when they were set; they are regression targets, guarding what ' +
        `the deadline gives today. The ${SLACK} ms past it allows for timers that wake late on a ` +
        'loaded machine, which a plain timeout suffers too: hence the second target, against one ' +
        'in the same run. The peer waits on every call and Sentinel, behind its breaker, on a few, ' +
        "so the peer's slowest is drawn from more calls; `breaker: false` compares call for call.",
      `Errors Sentinel reported: paused (both limiters) ${codes(pausedErrors)}; down ${codes(downErrors)}.`,
    ],
  };
}
