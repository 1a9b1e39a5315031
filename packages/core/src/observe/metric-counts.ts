// What the Prometheus metrics keep between scrapes, in plain structures: prom-client's own
// metrics hash their label set on every update, which would cost as much as a decision in memory.
import type { DecisionEvent } from './observer.ts';

/** The identities seen past the near-limit share lately, by when and under which tier. */
export class NearLimit {
  readonly #share: number;
  readonly #windowMs: number;
  readonly #max: number;
  /** identity -> when it was last seen near its limit, and its tier; oldest first. */
  readonly #seen = new Map<string, { at: number; tier: string }>();

  constructor(share: number, windowMs: number, max: number) {
    this.#share = share;
    this.#windowMs = windowMs;
    this.#max = max;
  }

  saw({ decision, identity }: DecisionEvent): void {
    let near = false;
    for (const p of decision.policies) {
      if (p.limit - p.remaining >= this.#share * p.limit) near = true;
    }
    if (!near) {
      if (this.#seen.size > 0) this.#seen.delete(identity);
      return;
    }
    // Deleted first, so the map stays in the order identities were last seen near.
    this.#seen.delete(identity);
    if (this.#seen.size >= this.#max) this.#seen.delete(this.#seen.keys().next().value as string);
    this.#seen.set(identity, { at: Date.now(), tier: decision.tier ?? '' });
  }

  countByTier(now: number): Map<string, number> {
    const counts = new Map<string, number>();
    for (const [identity, { at, tier }] of this.#seen) {
      if (at < now - this.#windowMs) {
        this.#seen.delete(identity);
        continue;
      }
      counts.set(tier, (counts.get(tier) ?? 0) + 1);
    }
    return counts;
  }
}

type Outcome = DecisionEvent['outcome'];

/** Decisions counted since prom-client last collected, by tier, then policy, then outcome. */
export class DecisionCounts {
  readonly #byTier = new Map<string, Map<string, Record<Outcome, number>>>();

  add(tier: string, policy: string, outcome: Outcome): void {
    let byPolicy = this.#byTier.get(tier);
    if (byPolicy === undefined) {
      byPolicy = new Map();
      this.#byTier.set(tier, byPolicy);
    }
    let counts = byPolicy.get(policy);
    if (counts === undefined) {
      counts = { allowed: 0, limited: 0, degraded: 0 };
      byPolicy.set(policy, counts);
    }
    counts[outcome]++;
  }

  /** Hands over every count, and starts again from zero. */
  flush(hand: (labels: { tier: string; policy: string; outcome: Outcome }, count: number) => void) {
    for (const [tier, byPolicy] of this.#byTier) {
      for (const [policy, counts] of byPolicy) {
        for (const outcome of ['allowed', 'limited', 'degraded'] as const) {
          if (counts[outcome] > 0) hand({ tier, policy, outcome }, counts[outcome]);
          counts[outcome] = 0;
        }
      }
    }
  }
}

/**
 * The store latency histogram, counted in plain arrays and read by the registry through the
 * interface every prom-client metric offers it (`get`, `reset`): prom-client's Histogram hashes
 * its label set on every observation.
 */
export class StoreDuration {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly help = 'Time the store took to answer a decision.';
  readonly #bounds: readonly number[];
  /** Observations per bucket, not cumulative; the last is above every bound. */
  readonly #counts: number[];
  #sum = 0;
  #count = 0;

  constructor(
    readonly name: string,
    bounds: readonly number[],
  ) {
    this.#bounds = [...bounds].sort((a, b) => a - b);
    this.#counts = new Array(this.#bounds.length + 1).fill(0);
  }

  observe(seconds: number): void {
    const bounds = this.#bounds;
    let i = 0;
    while (i < bounds.length && seconds > (bounds[i] as number)) i++;
    (this.#counts[i] as number)++;
    this.#sum += seconds;
    this.#count++;
  }

  get() {
    const { name } = this;
    let cumulative = 0;
    const values = this.#bounds.map((le, i) => {
      cumulative += this.#counts[i] as number;
      return { labels: { le }, value: cumulative, metricName: `${name}_bucket` };
    });
    values.push(
      {
        labels: { le: '+Inf' as unknown as number },
        value: this.#count,
        metricName: `${name}_bucket`,
      },
      { labels: {} as { le: number }, value: this.#sum, metricName: `${name}_sum` },
      { labels: {} as { le: number }, value: this.#count, metricName: `${name}_count` },
    );
    const { help, type, aggregator } = this;
    return Promise.resolve({ name, help, type, aggregator, values });
  }

  reset(): void {
    this.#counts.fill(0);
    this.#sum = 0;
    this.#count = 0;
  }
}
