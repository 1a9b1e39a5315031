// The embedded store: the same algorithms as the Lua scripts, run in process, with bounded memory.
import {
  adjusters,
  evaluators,
  type KeyState,
  type PolicyInput,
  type Slot,
} from '../../algorithms/index.ts';
import { EPOCH_MS } from '../../shared/lua-constants.generated.ts';
import type { PolicyOutcome, Store, StoreReply, StoreRequest } from '../../shared/types.ts';
import {
  checkObject,
  checkPositiveInteger,
  rejectUnknownOptions,
} from '../../shared/validation.ts';
import { IdentityRequest } from '../store-keys.ts';

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
}

/**
 * One key: its namespace (the key with its identity cut out, see KeyLayout) and its state, in
 * the list of its identity's keys. The first entry of a list stands for the identity in eviction.
 */
interface Entry {
  /** Kept so that eviction can walk the Map's values alone, without an array per step. */
  identity: string;
  namespace: string;
  state: KeyState;
  next: Entry | undefined;
  /** On the first entry: the identity was read since eviction last passed it by. */
  read: boolean;
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
 * Keys are filed by identity: one Map entry holds the list of an identity's keys (one per policy
 * of its plans), so a decision looks up the short identity rather than building and hashing its
 * long key strings, and eviction takes an identity's keys together.
 */
export class MemoryStore implements Store {
  readonly #identities = new Map<string, Entry>();
  /** Keys held, over every identity. */
  #size = 0;
  /** Reused by every evaluation: evaluate is synchronous, so one at a time uses them. */
  readonly #input: PolicyInput = { limit: 0, windowMs: 0, cost: 0, now: 0, apply: false };
  readonly #slot: Slot<KeyState> = { state: undefined, spare: undefined };
  readonly #maxKeys: number;
  /** Where eviction goes on from, or undefined to start at the oldest: see #evict. */
  #hand: MapIterator<Entry> | undefined;
  /** Identities filed since eviction last moved the hand. */
  #idle = 0;
  /** The first entry of the identity #read last looked up, as it left it. */
  #first: Entry | undefined;
  /** The entry of the identity last evicted, if it had one key: the next new key reuses it. */
  #spare: Entry | undefined;
  /**
   * The state of the key whose entry went to a new key last, and that key's namespace: the
   * algorithm's twin fills it in for the next new key of that namespace, so of that algorithm.
   * Keys filed whole share the empty namespace whatever their algorithm: they pass none on.
   */
  #spareState: KeyState | undefined;
  #spareNamespace: string | undefined;
  readonly #sweeper: NodeJS.Timeout;
  /** Requests' clock minus the real one: keys expire on the clock their requests carry. */
  #clockOffset = 0;

  constructor(options: MemoryStoreOptions = {}) {
    checkObject(options, 'options');
    rejectUnknownOptions(options, ['maxKeys', 'sweepIntervalMs'], '@sentinel/core');
    const { maxKeys = 100_000, sweepIntervalMs = 60_000 } = options;
    checkPositiveInteger(maxKeys, 'maxKeys');
    checkPositiveInteger(sweepIntervalMs, 'sweepIntervalMs');
    this.#maxKeys = maxKeys;
    this.#sweeper = setInterval(
      () => this.#sweep(Date.now() + this.#clockOffset - EPOCH_MS),
      sweepIntervalMs,
    );
    this.#sweeper.unref();
  }

  /** Keys held now, expired ones included until they are swept or read. */
  get size(): number {
    return this.#size;
  }

  evaluate(request: StoreRequest): StoreReply {
    // The limiter's requests name their identity and namespaces, and carry the time they were
    // sent; other keys are split here, and may then name different identities.
    let identities: string | readonly string[];
    let namespaces: readonly string[];
    let real: number;
    if (request instanceof IdentityRequest) {
      identities = request.identity;
      namespaces = request.layout.namespaces;
      real = Number.isNaN(request.sentAt) ? Date.now() : request.sentAt;
    } else {
      const split = request.keys.map(splitKey);
      identities = split.map((s) => s.identity);
      namespaces = split.map((s) => s.namespace);
      real = Date.now();
    }
    this.#clockOffset = request.now === undefined ? 0 : request.now - real;
    const now = (request.now ?? real) - EPOCH_MS;
    const at = request.now ?? real;
    if (request.adjust !== undefined) {
      this.#adjust(request, identities, namespaces, now);
      // Then what a peek would say, as the script replies; its boxes aside, as the script's are.
      return this.#run(request, identities, namespaces, now, 1, false, false, at, false);
    }
    // Several policies consume all or none, as in lua/prelude.lua: here a look at every policy,
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
      const entry = this.#find(identity, namespace);
      if (entry !== undefined) this.#remove(identity, entry);
    }
  }

  close(): void {
    clearInterval(this.#sweeper);
    this.#identities.clear();
    this.#size = 0;
    this.#hand = undefined;
    this.#first = undefined;
    this.#spare = undefined;
    this.#spareState = undefined;
    this.#spareNamespace = undefined;
  }

  /**
   * One pass over the policies, the twin of one pass of `decide` in lua/prelude.lua: `consume`
   * writes what admits; `apply` (a consume, in either pass) puts an identity that a policy with
   * a box refuses in that box; `boxes` false reads no box, as after a penalty or a refund.
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
          const entry = this.#read(
            this.#identityAt(identities, boxAt),
            namespaces[boxAt] as string,
            now,
          );
          if (entry !== undefined) held = entry.state.expiresAt - now;
        }
      }
      const entry = this.#read(identity, namespaces[i] as string, now);
      input.limit = policy.limit;
      input.windowMs = policy.windowMs;
      input.apply = consume && held <= 0;
      slot.state = entry?.state;
      if (entry === undefined && namespaces[i] === this.#spareNamespace) {
        slot.spare = this.#spareState;
      }
      const outcome = evaluators[policy.algorithm](input, slot);
      const next = slot.state;
      if (next !== undefined && next === slot.spare) {
        // Taken: no other key may have it.
        this.#spareState = undefined;
        this.#spareNamespace = undefined;
      }
      slot.state = undefined;
      slot.spare = undefined;
      if (next === undefined) {
        if (entry !== undefined) this.#remove(identity, entry);
      } else if (entry !== undefined) {
        entry.state = next;
      } else {
        this.#insert(identity, namespaces[i] as string, next, this.#first);
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
    const entry = this.#read(identity, namespace, now);
    if (entry !== undefined) entry.state = { expiresAt: now + ms };
    else this.#insert(identity, namespace, { expiresAt: now + ms }, this.#first);
  }

  /** Takes a penalty, or gives a refund back, per policy: the twins of ADJUSTMENTS. */
  #adjust(
    { policies, cost, adjust }: StoreRequest,
    identities: string | readonly string[],
    namespaces: readonly string[],
    now: number,
  ): void {
    const refundAt = adjust?.kind === 'refund' ? adjust.at - EPOCH_MS : undefined;
    const amount = refundAt === undefined ? cost : -cost;
    const input = this.#input;
    input.now = now;
    const slot = this.#slot;
    for (let i = 0; i < policies.length; i++) {
      const policy = policies[i] as StoreRequest['policies'][number];
      const identity = this.#identityAt(identities, i);
      const entry = this.#read(identity, namespaces[i] as string, now);
      input.limit = policy.limit;
      input.windowMs = policy.windowMs;
      slot.state = entry?.state;
      adjusters[policy.algorithm](input, slot, amount, refundAt);
      const next = slot.state;
      slot.state = undefined;
      if (next === undefined) {
        if (entry !== undefined) this.#remove(identity, entry);
      } else if (entry !== undefined) {
        entry.state = next;
      } else {
        this.#insert(identity, namespaces[i] as string, next, this.#first);
      }
    }
  }

  #find(identity: string, namespace: string): Entry | undefined {
    let entry = this.#identities.get(identity);
    while (entry !== undefined && entry.namespace !== namespace) entry = entry.next;
    return entry;
  }

  /**
   * A key's live entry, its identity marked used; an expired key reads as absent. Marking is one
   * field write: keeping the Map in exact use order would cost a delete and an insert per read.
   */
  #read(identity: string, namespace: string, now: number): Entry | undefined {
    const first = this.#identities.get(identity);
    this.#first = first;
    if (first === undefined) return undefined;
    first.read = true;
    let entry: Entry | undefined = first;
    while (entry !== undefined && entry.namespace !== namespace) entry = entry.next;
    if (entry === undefined) return undefined;
    if (entry.state.expiresAt <= now) {
      // Gone for good, as in Redis: a later request with an earlier clock must not revive it.
      this.#remove(identity, entry);
      this.#first = first === entry ? entry.next : first;
      return undefined;
    }
    return entry;
  }

  /**
   * Files a new key; a new identity comes last in eviction order, as not read yet. `known` is
   * the identity's first entry as #read found it, which spares a lookup unless eviction ran.
   */
  #insert(identity: string, namespace: string, state: KeyState, known: Entry | undefined): void {
    let first = known;
    if (this.#size >= this.#maxKeys) {
      while (this.#size >= this.#maxKeys && this.#evict());
      // Eviction may have taken this very identity.
      if (first !== undefined) first = this.#identities.get(identity);
    } else if (++this.#idle > this.#maxKeys) {
      // An iterator holds on to every table the Map has outgrown since it last moved: a hand
      // left still while keys come and go would keep them all. Past maxKeys new keys without
      // an eviction it is let go, and the next eviction starts a hand at the oldest identity.
      this.#hand = undefined;
      this.#idle = 0;
    }
    let entry = this.#spare;
    if (entry === undefined) {
      entry = { identity, namespace, state, next: undefined, read: false };
    } else {
      // Recycled: under a flood every new key evicts one, and its entry would be old garbage.
      this.#spare = undefined;
      if (entry.namespace !== '') {
        this.#spareState = entry.state;
        this.#spareNamespace = entry.namespace;
      }
      entry.identity = identity;
      entry.namespace = namespace;
      entry.state = state;
      entry.read = false;
    }
    if (first === undefined) {
      this.#identities.set(identity, entry);
    } else {
      // After the first, which keeps the identity's place and mark.
      entry.next = first.next;
      first.next = entry;
    }
    this.#size++;
  }

  #remove(identity: string, entry: Entry): void {
    const first = this.#identities.get(identity) as Entry;
    this.#size--;
    if (first === entry) {
      if (entry.next === undefined) {
        this.#identities.delete(identity);
      } else {
        entry.next.read = entry.read;
        this.#identities.set(identity, entry.next);
      }
      return;
    }
    let before = first;
    while (before.next !== entry) before = before.next as Entry;
    before.next = entry.next;
  }

  /**
   * Evicts one identity, approximately the least recently used, as the CLOCK algorithm does: a
   * hand goes round the identities in insertion order, and one read since the hand last passed
   * it is spared once. The hand is one iterator kept across evictions: a fresh one would walk
   * past every entry deleted at the front of the Map since it last compacted, which under a
   * flood of new keys is most of it.
   */
  #evict(): boolean {
    this.#idle = 0;
    for (;;) {
      const first = this.#advance();
      if (first === undefined) return false;
      if (!first.read) {
        this.#identities.delete(first.identity);
        for (let entry: Entry | undefined = first; entry !== undefined; entry = entry.next) {
          this.#size--;
        }
        if (first.next === undefined) this.#spare = first;
        return true;
      }
      first.read = false;
    }
  }

  /** The identity under the hand, which then moves on; round to the first after the last. */
  #advance(): Entry | undefined {
    let next = this.#hand?.next();
    if (next === undefined || next.done) {
      this.#hand = this.#identities.values();
      next = this.#hand.next();
      if (next.done) return undefined;
    }
    return next.value;
  }

  #sweep(now: number): void {
    for (const [identity, first] of this.#identities) {
      for (let entry: Entry | undefined = first; entry !== undefined; entry = entry.next) {
        if (entry.state.expiresAt <= now) this.#remove(identity, entry);
      }
    }
  }
}
