// Decisions per second by outcome over the last five minutes, and who was limited most: the status page's data.
import { createHash } from 'node:crypto';
import type { DecisionEvent, Observer } from '@sentinel/core';

export const OUTCOMES = ['allowed', 'limited', 'degraded'] as const;
export type Outcome = (typeof OUTCOMES)[number];

/** Seconds of history kept: one slot each, in a ring. */
export const HISTORY_SECONDS = 300;

/**
 * Identities a second remembers as limited. A flood of distinct identities (a scan across IPs)
 * still counts in the totals, but cannot grow the ring's memory without bound.
 */
const IDENTITIES_PER_SECOND = 100;

export type SecondCounts = { at: number } & Record<Outcome, number>;

export interface LimitedIdentity {
  /** The first 12 hex digits of the SHA-256 of the identity as store keys carry it. */
  identity: string;
  tier: string | undefined;
  limited: number;
}

export interface StatsSnapshot {
  /** Unix seconds of the newest slot, which is still filling. */
  now: number;
  /** One entry per second, oldest first, HISTORY_SECONDS of them. */
  seconds: SecondCounts[];
  /** Over those seconds. */
  totals: Record<Outcome, number>;
  mostLimited: LimitedIdentity[];
  /** Concurrency slots this gateway's requests hold now, `shed`'s fleet count included. */
  inFlight: number;
  /** Requests `shed` refused over those seconds: counted apart from the identities' decisions. */
  shed: number;
}

interface Slot extends SecondCounts {
  limitedBy: Map<string, { tier: string | undefined; count: number }>;
  shed: number;
}

/** The tiers of `shed`'s own limiter, whose decisions are the fleet's, not an identity's. */
const FLEET_TIERS = new Set(['shed', 'shed-critical']);

/**
 * What the status page shows of an identity: a digest prefix, enough to tell identities apart
 * and to match one the admin route names, never the identity itself.
 */
export function identityDigest(identity: string): string {
  return createHash('sha256').update(identity).digest('hex').slice(0, 12);
}

/** Counts consumed decisions into a ring of per-second slots; peeks are not traffic. */
export class DecisionStats {
  readonly #slots: Slot[] = [];
  readonly #now: () => number;
  #inFlight = 0;

  /** Pass it in the plugin's `observe` list. */
  readonly observer: Observer = {
    decision: (event) => this.record(event),
    release: (event) => {
      this.#inFlight -= event.slots * event.policies.length;
    },
  };

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  record({ consumed, outcome, identity, decision }: DecisionEvent): void {
    if (!consumed) return;
    const { lease } = decision;
    if (lease !== undefined) this.#inFlight += lease.slots * lease.policies.length;
    const slot = this.#slotAt(Math.floor(this.#now() / 1000));
    if (decision.tier !== undefined && FLEET_TIERS.has(decision.tier)) {
      if (outcome === 'limited') slot.shed++;
      return;
    }
    slot[outcome]++;
    if (outcome !== 'limited') return;
    const seen = slot.limitedBy.get(identity);
    if (seen) seen.count++;
    else if (slot.limitedBy.size < IDENTITIES_PER_SECOND) {
      slot.limitedBy.set(identity, { tier: decision.tier, count: 1 });
    }
  }

  snapshot(top = 10): StatsSnapshot {
    const now = Math.floor(this.#now() / 1000);
    const seconds: SecondCounts[] = [];
    const totals = { allowed: 0, limited: 0, degraded: 0 };
    let shed = 0;
    const limited = new Map<string, { tier: string | undefined; count: number }>();
    for (let at = now - HISTORY_SECONDS + 1; at <= now; at++) {
      const slot = this.#slots[at % HISTORY_SECONDS];
      const live = slot?.at === at ? slot : undefined;
      const counts = {
        at,
        allowed: live?.allowed ?? 0,
        limited: live?.limited ?? 0,
        degraded: live?.degraded ?? 0,
      };
      seconds.push(counts);
      shed += live?.shed ?? 0;
      for (const outcome of OUTCOMES) totals[outcome] += counts[outcome];
      for (const [identity, { tier, count }] of live?.limitedBy ?? []) {
        const sum = limited.get(identity);
        if (sum) sum.count += count;
        else limited.set(identity, { tier, count });
      }
    }
    const mostLimited = [...limited]
      .sort(([, a], [, b]) => b.count - a.count)
      .slice(0, top)
      .map(([identity, { tier, count }]) => ({
        identity: identityDigest(identity),
        tier,
        limited: count,
      }));
    return { now, seconds, totals, mostLimited, inFlight: this.#inFlight, shed };
  }

  /** The slot of second `at`, emptied first if it still holds a second from a lap ago. */
  #slotAt(at: number): Slot {
    const index = at % HISTORY_SECONDS;
    let slot = this.#slots[index];
    if (slot?.at !== at) {
      slot = { at, allowed: 0, limited: 0, degraded: 0, limitedBy: new Map(), shed: 0 };
      this.#slots[index] = slot;
    }
    return slot;
  }
}
