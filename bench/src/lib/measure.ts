// Same-run comparisons: contenders take turns, round after round, and each is reported by its
// median, so drift on a noisy machine falls on all of them alike.

export interface BenchConfig {
  /** A few seconds in all: keeps the suites working in CI and asserts nothing about speed. */
  readonly smoke: boolean;
  /** Rounds per comparison; each round runs every contender once. */
  readonly rounds: number;
  /** Seconds each contender runs per round. */
  readonly seconds: number;
  /** `--only`: the parts of a suite to run, where it has parts (the HTTP suite's frameworks). */
  readonly only?: readonly string[];
}

export interface Contender<T> {
  readonly name: string;
  run(): Promise<T>;
}

/** Runs the contenders in turn, `rounds` times; a contender's figures in round order. */
export async function alternate<T>(
  rounds: number,
  contenders: readonly Contender<T>[],
): Promise<Map<string, T[]>> {
  const figures = new Map<string, T[]>(contenders.map((c) => [c.name, []]));
  for (let round = 0; round < rounds; round++) {
    // Every other round runs in reverse, so nobody always goes first (cold) or last (warm).
    const order = round % 2 === 0 ? contenders : [...contenders].reverse();
    for (const contender of order) figures.get(contender.name)?.push(await contender.run());
  }
  return figures;
}

/**
 * Runs the contenders in short stretches of `stretchMs`, one after the other and in reverse order
 * every other turn, until each has run `totalMs`; each contender's mean rate over its stretches.
 * This host runs the same code at one of two speeds about 2x apart, switching for seconds at a
 * time: turns of seconds can meet different states, while stretches this short meet them alike.
 * For in-process contenders that differ by a few percent, where rounds of seconds cannot tell.
 */
export async function inStretches(
  totalMs: number,
  stretchMs: number,
  contenders: readonly { readonly name: string; run(ms: number): Promise<number> }[],
): Promise<Map<string, number>> {
  const sums = new Map<string, number>(contenders.map((c) => [c.name, 0]));
  const turns = Math.max(1, Math.round(totalMs / stretchMs));
  for (let turn = 0; turn < turns; turn++) {
    const order = turn % 2 === 0 ? contenders : [...contenders].reverse();
    for (const contender of order) {
      const perSecond = await contender.run(stretchMs);
      sums.set(contender.name, (sums.get(contender.name) ?? 0) + perSecond);
    }
  }
  return new Map([...sums].map(([name, sum]) => [name, sum / turns]));
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

/** The value at quantile q (0..1) of a sample, nearest rank. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[
    Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))
  ] as number;
}

/** Runs `task` with up to `inFlight` calls outstanding for `ms`; the completed calls per second. */
export async function saturate(
  inFlight: number,
  ms: number,
  task: (i: number) => Promise<unknown>,
): Promise<number> {
  let done = 0;
  let next = 0;
  const started = performance.now();
  const until = started + ms;
  const worker = async (): Promise<void> => {
    while (performance.now() < until) {
      await task(next++);
      done++;
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  return done / ((performance.now() - started) / 1000);
}

// --- What a suite reports ------------------------------------------------------------------------

/** One goal of the performance issue, met or not, with the figure that decides it. */
export interface Target {
  readonly goal: string;
  readonly figure: string;
  readonly met: boolean;
}

/** One bar of the chart: Sentinel's figure over its peer's (or over the floor's), same run. */
export interface Ratio {
  readonly label: string;
  readonly value: number;
  /** The ratio the target asks for, drawn as a mark on the bar. */
  readonly goal?: number;
}

/**
 * A ratio CI's smoke run checks: below `collapse` the run fails. Set far below the target, so
 * that only a collapse fails CI and a noisy machine never does.
 */
export interface Gate {
  readonly label: string;
  readonly value: number;
  readonly collapse: number;
}

export interface SuiteReport {
  readonly title: string;
  /** One paragraph: what was measured and how. */
  readonly method: string;
  readonly columns: readonly string[];
  readonly rows: readonly (readonly string[])[];
  readonly ratios: readonly Ratio[];
  readonly targets: readonly Target[];
  readonly notes?: readonly string[];
  readonly gates?: readonly Gate[];
}

export type Suite = (config: BenchConfig) => Promise<SuiteReport>;

// --- Formatting ---------------------------------------------------------------------------------

/** 123456 -> "123k", 1234567 -> "1.23M", 950 -> "950". */
export function rate(perSecond: number): string {
  if (!Number.isFinite(perSecond)) return 'n/a';
  if (perSecond >= 1e6) return `${(perSecond / 1e6).toFixed(2)}M`;
  if (perSecond >= 1e4) return `${Math.round(perSecond / 1e3)}k`;
  if (perSecond >= 1e3) return `${(perSecond / 1e3).toFixed(1)}k`;
  return perSecond.toFixed(0);
}

export function times(ratio: number): string {
  return Number.isFinite(ratio) ? `${ratio.toFixed(2)}×` : 'n/a';
}

export function ms(value: number): string {
  if (!Number.isFinite(value)) return 'n/a';
  return value < 1
    ? `${value.toFixed(3)} ms`
    : value < 10
      ? `${value.toFixed(2)} ms`
      : `${value.toFixed(1)} ms`;
}

export function mb(bytes: number): string {
  return `${Math.round(bytes / 2 ** 20)} MB`;
}
