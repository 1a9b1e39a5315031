// The memory store's keys, filed by identity, with eviction past a bound: which keys stay is
// this file's concern; what a key's state means is the algorithms' (see memory-store.ts).
import type { KeyState } from '../../algorithms/index.ts';

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
 * Keys are filed by identity: one Map entry holds the list of an identity's keys (one per policy
 * of its plans), so a decision looks up the short identity rather than building and hashing its
 * long key strings, and eviction takes an identity's keys together.
 */
export class IdentityTable {
  readonly #identities = new Map<string, Entry>();
  /** Keys held, over every identity. */
  #size = 0;
  readonly #maxKeys: number;
  /** Where eviction goes on from, or undefined to start at the oldest: see #evict. */
  #hand: MapIterator<Entry> | undefined;
  /** Identities filed since eviction last moved the hand. */
  #idle = 0;
  /** The first entry of the identity `read` looked up last, as it left it. */
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

  constructor(maxKeys: number) {
    this.#maxKeys = maxKeys;
  }

  /** Keys held now, expired ones included until they are swept or read. */
  get size(): number {
    return this.#size;
  }

  /** A state object a new key of `namespace` may fill in rather than allocate; see #spareState. */
  spareFor(namespace: string): KeyState | undefined {
    return namespace === this.#spareNamespace ? this.#spareState : undefined;
  }

  /** The spare state went to a key: no other key may have it. */
  spareTaken(): void {
    this.#spareState = undefined;
    this.#spareNamespace = undefined;
  }

  find(identity: string, namespace: string): Entry | undefined {
    let entry = this.#identities.get(identity);
    while (entry !== undefined && entry.namespace !== namespace) entry = entry.next;
    return entry;
  }

  /**
   * A key's live entry, its identity marked used; an expired key reads as absent. Marking is one
   * field write: keeping the Map in exact use order would cost a delete and an insert per read.
   */
  read(identity: string, namespace: string, now: number): Entry | undefined {
    const first = this.#identities.get(identity);
    this.#first = first;
    if (first === undefined) return undefined;
    first.read = true;
    let entry: Entry | undefined = first;
    while (entry !== undefined && entry.namespace !== namespace) entry = entry.next;
    if (entry === undefined) return undefined;
    if (entry.state.expiresAt <= now) {
      // Gone for good, as in Redis: a later request with an earlier clock must not revive it.
      this.remove(identity, entry);
      this.#first = first === entry ? entry.next : first;
      return undefined;
    }
    return entry;
  }

  /**
   * Files a new key of the identity `read` looked up last; a new identity comes last in eviction
   * order, as not read yet. The identity's first entry as `read` found it spares a lookup unless
   * eviction ran.
   */
  insertAfterRead(identity: string, namespace: string, state: KeyState): void {
    let first = this.#first;
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

  remove(identity: string, entry: Entry): void {
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

  /** Removes every expired key. */
  sweep(now: number): void {
    for (const [identity, first] of this.#identities) {
      for (let entry: Entry | undefined = first; entry !== undefined; entry = entry.next) {
        if (entry.state.expiresAt <= now) this.remove(identity, entry);
      }
    }
  }

  clear(): void {
    this.#identities.clear();
    this.#size = 0;
    this.#hand = undefined;
    this.#first = undefined;
    this.#spare = undefined;
    this.#spareState = undefined;
    this.#spareNamespace = undefined;
  }
}
