// The embedded store: the same algorithms as the Lua scripts, run in process, with bounded memory.
import {
  adjusters,
  evaluators,
  type KeyState,
  leases,
  type PolicyInput,
  type Slot,
} from '../../algorithms/index.ts';
import { EPOCH_MS } from '../../shared/lua-constants.generated.ts';
import type { PolicyOutcome, Store, StoreReply, StoreRequest } from '../../shared/types.ts';
import {
  checkFunction,
  checkObject,
  checkPositiveInteger,
  rejectUnknownOptions,
} from '../../shared/validation.ts';
import { IdentityRequest, JointLayout } from '../store-keys.ts';
import { IdentityTable } from './identity-table.ts';

export interface MemoryStoreOptions {
  /**
   * Keys kept at most; past it the keys of an identity not used lately are evicted together
   * (approximately the least recently used identity, as Redis's `allkeys-lru` picks keys).
   * @default 100_000
   */
  maxKeys?: number;
  /**
   * How often expired keys are swept, in milliseconds. The timer never keeps the process alive.
   * @default 60_000
   */
  sweepIntervalMs?: number;
  /**
   * The time this store decides on, in Unix ms: for tests that move time instead of sleeping.
   * Windows refill, penalty boxes end and concurrency leases lapse as it advances; the limiters
   * on this store state their times (a legacy reset) on it too. A Redis store has no such
   * option: it always decides on Redis's clock.
   * @default Date.now
   * @example let now = Date.now(); new MemoryStore({ clock: () => now }); now += 60_000;
   */
  clock?: () => number;
}

/**
 * A key as the store files it: the identity in its hash tag, and the rest. Keys that carry no
 * hash tag are filed whole, under the empty namespace, which no tagged key has.
 */
function splitKey(key: string): { identity: string; namespace: string } {
  const open = key.indexOf('{');
  const close = open < 0 ? -1 : key.indexOf('}', open + 1);
  if (close < 0) return { identity: key, namespace: '' };
  return {
    identity: key.slice(open + 1, close),
    namespace: key.slice(0, open + 1) + key.slice(close),
  };
}

/**
 * The embedded store: each request decided by the algorithms' TypeScript twins, against state
 * its IdentityTable keeps by identity and evicts past `maxKeys`.
 */
export class MemoryStore implements Store {
  readonly #table: IdentityTable;
  /** Reused by every evaluation: evaluate is synchronous, so one at a time uses them. */
  readonly #input: PolicyInput = { limit: 0, windowMs: 0, cost: 0, now: 0, apply: false };
  readonly #slot: Slot<KeyState> = { state: undefined, spare: undefined };
  readonly #sweeper: NodeJS.Timeout;
  /** Requests' clock minus the real one: keys expire on the clock their requests carry. */
  #clockOffset = 0;
  /** The `clock` option: undefined for the real time, which requests carry as they are sent. */
  readonly clock: (() => number) | undefined;

  constructor(options: MemoryStoreOptions = {}) {
    checkObject(options, 'options');
    rejectUnknownOptions(options, ['maxKeys', 'sweepIntervalMs', 'clock'], '@sentinel/core');
    const { maxKeys = 100_000, sweepIntervalMs = 60_000, clock } = options;
    checkPositiveInteger(maxKeys, 'maxKeys');
    checkPositiveInteger(sweepIntervalMs, 'sweepIntervalMs');
    if (clock !== undefined) checkFunction(clock, 'clock');
    this.clock = clock;
    this.#table = new IdentityTable(maxKeys);
    this.#sweeper = setInterval(
      () => this.#table.sweep((clock?.() ?? Date.now() + this.#clockOffset) - EPOCH_MS),
      sweepIntervalMs,
    );
    this.#sweeper.unref();
  }

  /** Keys held now, expired ones included until they are swept or replaced. */
  get size(): number {
    return this.#table.size;
  }

  evaluate(request: StoreRequest): StoreReply {
    // The limiter's requests name their identity and namespaces, and carry the time they were
    // sent; other keys are split here, and may then name different identities.
    let identities: string | readonly string[];
    let namespaces: readonly string[];
    let real: number;
    if (request instanceof IdentityRequest) {
      const { layout } = request;
      identities = layout instanceof JointLayout ? layout.identities : request.identity;
      namespaces = request.layout.namespaces;
      real = Number.isNaN(request.sentAt) ? Date.now() : request.sentAt;
    } else {
      const split = request.keys.map(splitKey);
      identities = split.map((s) => s.identity);
      namespaces = split.map((s) => s.namespace);
      real = Date.now();
    }
    // The limiter sends this store's clock with each request; a direct call reads it here.
    const given = request.now ?? this.clock?.();
    this.#clockOffset = given === undefined ? 0 : given - real;
    const at = given ?? real;
    const now = at - EPOCH_MS;
    if (request.adjust !== undefined) {
      const held = this.#adjust(request, identities, namespaces, now);
      const kind = request.adjust.kind;
      // A release and a renewal answer only whether each lease was still held, as the script
      // does; the rest answer what a peek would say, their boxes aside, as the script's are.
      if (kind !== 'release' && kind !== 'renew') {
        return this.#run(request, identities, namespaces, now, 1, false, false, at, false);
      }
      const policies = held.map((allowed) => ({
        allowed,
        remaining: 0,
        resetMs: 0,
        retryAfterMs: 0,
      }));
      return { allowed: held.every(Boolean), policies, at };
    }
    // Several policies consume all or none, as in lua/prelude/decision.lua: here a look at every policy,
    // then the consume when all admit.
    const { apply, cost } = request;
    if (request.policies.length === 1 || !apply) {
      return this.#run(request, identities, namespaces, now, cost, apply, apply, at);
    }
    const look = this.#run(request, identities, namespaces, now, cost, false, true, at);
    return look.allowed
      ? this.#run(request, identities, namespaces, now, cost, true, true, at)
      : look;
  }

  reset(keys: readonly string[]): void {
    for (const key of keys) {
      const { identity, namespace } = splitKey(key);
      const entry = this.#table.find(identity, namespace);
      if (entry !== undefined) this.#table.remove(identity, entry);
    }
  }

  close(): void {
    clearInterval(this.#sweeper);
    this.#table.clear();
  }

  /**
   * One pass over the policies, the twin of one pass of `decide` in lua/prelude/decision.lua: `consume`
   * writes what admits; `apply` (a consume, in either pass) puts an identity that a policy with
   * a box refuses in that box; `boxes` false reads no box, as after a penalty or a refund.
   * One function, past a screen, on purpose: it is the memory store's whole decision, run for
   * every policy of every request, and it reads step for step against the script's loop.
   */
  #run(
    { policies }: StoreRequest,
    identities: string | readonly string[],
    namespaces: readonly string[],
    now: number,
    cost: number,
    consume: boolean,
    apply: boolean,
    at: number,
    boxes = true,
  ): StoreReply {
    const outcomes: PolicyOutcome[] = new Array(policies.length);
    let allowed = true;
    const input = this.#input;
    input.cost = cost;
    input.now = now;
    const slot = this.#slot;
    // Box keys follow the policies' keys, one per policy with a box.
    let box = policies.length;
    for (let i = 0; i < policies.length; i++) {
      const policy = policies[i] as StoreRequest['policies'][number];
      const identity = typeof identities === 'string' ? identities : (identities[i] as string);
      let boxAt: number | undefined;
      let held = 0;
      if (policy.blockForMs > 0) {
        boxAt = box++;
        if (boxes) {
          const entry = this.#table.read(
            this.#identityAt(identities, boxAt),
            namespaces[boxAt] as string,
            now,
          );
          if (entry !== undefined) held = entry.state.expiresAt - now;
        }
      }
      const entry = this.#table.read(identity, namespaces[i] as string, now);
      input.limit = policy.limit;
      input.windowMs = policy.windowMs;
      input.apply = consume && held <= 0;
      slot.state = entry?.state;
      if (entry === undefined) slot.spare = this.#table.spareFor(namespaces[i] as string);
      const outcome = evaluators[policy.algorithm](input, slot);
      const next = slot.state;
      if (next !== undefined && next === slot.spare) this.#table.spareTaken(next);
      slot.state = undefined;
      slot.spare = undefined;
      if (next === undefined) {
        if (entry !== undefined) this.#table.remove(identity, entry);
        else this.#table.dropDead();
      } else if (entry !== undefined) {
        entry.state = next;
      } else {
        this.#table.insertAfterRead(identity, namespaces[i] as string, next);
      }
      if (held > 0) {
        // In the box: refused until it ends, and nothing consumed.
        outcome.allowed = false;
        outcome.remaining = 0;
        outcome.resetMs = Math.max(outcome.resetMs, held);
        outcome.retryAfterMs = Math.max(outcome.retryAfterMs, held);
      } else if (!outcome.allowed && apply && boxAt !== undefined) {
        this.#hold(
          this.#identityAt(identities, boxAt),
          namespaces[boxAt] as string,
          now,
          policy.blockForMs,
        );
        outcome.resetMs = Math.max(outcome.resetMs, policy.blockForMs);
        outcome.retryAfterMs = Math.max(outcome.retryAfterMs, policy.blockForMs);
      }
      outcomes[i] = outcome;
      if (!outcome.allowed) allowed = false;
    }
    return { allowed, policies: outcomes, at };
  }

  #identityAt(identities: string | readonly string[], i: number): string {
    return typeof identities === 'string' ? identities : (identities[i] as string);
  }

  /** Puts an identity in a policy's box for `ms`, as SET <box> 1 PX ms does. */
  #hold(identity: string, namespace: string, now: number, ms: number): void {
    const entry = this.#table.read(identity, namespace, now);
    if (entry !== undefined) entry.state = { expiresAt: now + ms };
    else this.#table.insertAfterRead(identity, namespace, { expiresAt: now + ms });
  }

  /**
   * Takes a penalty, gives a refund back, releases or renews, per policy: the twins of
   * ADJUSTMENTS and LEASES. Returns, per policy, whether a release or renewal found its slots.
   */
  #adjust(
    { policies, cost, adjust }: StoreRequest,
    identities: string | readonly string[],
    namespaces: readonly string[],
    now: number,
  ): boolean[] {
    const kind = adjust?.kind;
    const chargedAt =
      adjust !== undefined && adjust.kind !== 'penalize' ? adjust.at - EPOCH_MS : undefined;
    const amount = chargedAt === undefined ? cost : -cost;
    const input = this.#input;
    input.now = now;
    input.cost = cost;
    const slot = this.#slot;
    const held = new Array<boolean>(policies.length).fill(true);
    // This store takes no quota lease (a request's `quota` is ignored), so it has none to end.
    if (kind === 'quota') return held;
    for (let i = 0; i < policies.length; i++) {
      const policy = policies[i] as StoreRequest['policies'][number];
      const lease = leases[policy.algorithm];
      // A release and a renewal touch only the policies that hold leases, which a refund and a
      // penalty leave alone, as `decide` does.
      if ((kind === 'release' || kind === 'renew') !== (lease !== undefined)) continue;
      const identity = this.#identityAt(identities, i);
      const entry = this.#table.read(identity, namespaces[i] as string, now);
      input.limit = policy.limit;
      input.windowMs = policy.windowMs;
      slot.state = entry?.state;
      if (lease !== undefined && (kind === 'renew' || kind === 'release')) {
        held[i] = lease[kind](input, slot, chargedAt as number);
      } else {
        adjusters[policy.algorithm](input, slot, amount, chargedAt);
      }
      const next = slot.state;
      slot.state = undefined;
      if (next === undefined) {
        if (entry !== undefined) this.#table.remove(identity, entry);
        else this.#table.dropDead();
      } else if (entry !== undefined) {
        entry.state = next;
      } else {
        this.#table.insertAfterRead(identity, namespaces[i] as string, next);
      }
    }
    return held;
  }
}
