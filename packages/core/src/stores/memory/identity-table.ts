// The memory store's keys, filed by identity, with eviction past a bound: which keys stay is
// this file's concern; what a key's state means is the algorithms' (see memory-store.ts).
import { randomInt } from 'node:crypto';
import type { KeyState } from '../../algorithms/index.ts';
import { charCodeAt } from '../../shared/char-code.ts';

/**
 * One key: its namespace (the key with its identity cut out, see KeyLayout) and its state, in
 * the list of its identity's keys. The first entry of a list stands for the identity: it holds
 * the identity's slot, hash and mark; the entries after it keep slot -1.
 */
interface Entry {
  identity: string;
  namespace: string;
  state: KeyState;
  next: Entry | undefined;
  /** On the first entry: the identity was read since eviction last passed it by. */
  read: boolean;
  /** On the first entry: the identity's hash, which finds its place in the index. */
  hash: number;
  /** On the first entry: its place in the slots, or -1 once it is no longer filed. */
  slot: number;
}

/** Index positions at the least: a store that holds few keys stays small. */
const MIN_CAPACITY = 16;

/**
 * Keys are filed by identity: one slot holds the list of an identity's keys (one per policy of
 * its plans), so a decision looks up the short identity rather than building and hashing its
 * long key strings, and eviction takes an identity's keys together.
 *
 * The index is open addressing over a typed array of (hash, slot) pairs rather than a Map: at
 * 1M keys cycling through 100k, every decision misses, evicts and inserts, and a Map's chains
 * cost a cache miss per entry and per key string compared. Here a miss reads one or two pairs
 * side by side, and a string is compared only when its whole hash matches. The hash is seeded
 * per table, as V8 seeds its own, so that clients cannot choose identities that collide.
 */
export class IdentityTable {
  /** (hash, slot + 1) pairs, 0 for an empty place; linear probing, at most half full. */
  #index = new Int32Array(2 * MIN_CAPACITY);
  #mask = MIN_CAPACITY - 1;
  /** The first entry of each identity filed, by slot: the ring eviction's hand goes round. */
  #slots: (Entry | undefined)[] = [];
  /** Slots given up, reused before the slots grow. */
  #free: number[] = [];
  /** Identities filed. */
  #filed = 0;
  /** Keys held, over every identity. */
  #size = 0;
  readonly #maxKeys: number;
  readonly #seed = randomInt(2 ** 32) | 0;
  /** The slot eviction looks at next. */
  #hand = 0;
  /** The first entry of the identity `read` looked up last, as it left it, and its hash. */
  #first: Entry | undefined;
  #readHash = 0;
  /** The entry of the identity last evicted, if it had one key: the next new key reuses it. */
  #spare: Entry | undefined;
  /**
   * The state of the key whose entry went to a new key last, and that key's namespace: the
   * algorithm's twin fills it in for the next new key of that namespace, so of that algorithm.
   * Keys filed whole share the empty namespace whatever their algorithm: they pass none on.
   */
  #spareState: KeyState | undefined;
  #spareNamespace: string | undefined;
  /**
   * The key `read` found expired, left filed but dead: the new state that usually follows (a key
   * that refilled to full since its last visit, the common case) takes its place and its state
   * object, rather than costing a removal, an insertion and an allocation.
   */
  #dead: Entry | undefined;

  constructor(maxKeys: number) {
    this.#maxKeys = maxKeys;
  }

  /** Keys held now, expired ones included until they are swept or replaced. */
  get size(): number {
    return this.#size;
  }

  /**
   * A state object a new key of `namespace` may fill in rather than allocate: the dead state of
   * the key `read` just found expired, or #spareState.
   */
  spareFor(namespace: string): KeyState | undefined {
    const dead = this.#dead;
    if (dead !== undefined && dead.namespace === namespace) return dead.state;
    return namespace === this.#spareNamespace ? this.#spareState : undefined;
  }

  /** A spare state went to a key: no other key may have it. */
  spareTaken(state: KeyState): void {
    if (state !== this.#spareState) return;
    this.#spareState = undefined;
    this.#spareNamespace = undefined;
  }

  find(identity: string, namespace: string): Entry | undefined {
    let entry = this.#lookup(identity, this.#hash(identity));
    while (entry !== undefined && entry.namespace !== namespace) entry = entry.next;
    return entry;
  }

  /**
   * A key's live entry, its identity marked used; an expired key reads as absent. Marking is one
   * field write: keeping the identities in exact use order would cost a move per read.
   */
  read(identity: string, namespace: string, now: number): Entry | undefined {
    if (this.#dead !== undefined) this.dropDead();
    const hash = this.#hash(identity);
    this.#readHash = hash;
    const first = this.#lookup(identity, hash);
    this.#first = first;
    if (first === undefined) return undefined;
    first.read = true;
    let entry: Entry | undefined = first;
    while (entry !== undefined && entry.namespace !== namespace) entry = entry.next;
    if (entry === undefined) return undefined;
    if (entry.state.expiresAt <= now) {
      // Gone for good, as in Redis: a later request with an earlier clock must not revive it.
      entry.state.expiresAt = Number.NEGATIVE_INFINITY;
      this.#dead = entry;
      return undefined;
    }
    return entry;
  }

  /**
   * Files a new key of the identity `read` looked up last; a new identity takes a slot that
   * eviction reaches last, or the slot eviction just freed, which the hand has passed. The
   * identity's first entry and hash as `read` found them spare a lookup.
   */
  insertAfterRead(identity: string, namespace: string, state: KeyState): void {
    const dead = this.#dead;
    if (dead !== undefined) {
      // The same key, which `read` found expired: it comes back to life in its own place.
      this.#dead = undefined;
      dead.state = state;
      return;
    }
    let first = this.#first;
    if (this.#size >= this.#maxKeys) {
      while (this.#size >= this.#maxKeys && this.#evict());
      // Eviction may have taken this very identity.
      if (first !== undefined && first.slot < 0) first = undefined;
    }
    let entry = this.#spare;
    if (entry === undefined) {
      entry = { identity, namespace, state, next: undefined, read: false, hash: 0, slot: -1 };
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
      entry.next = undefined;
      entry.read = false;
    }
    if (first === undefined) {
      this.#file(entry, this.#readHash);
    } else {
      // After the first, which keeps the identity's place and mark.
      entry.next = first.next;
      first.next = entry;
    }
    this.#size++;
  }

  /** Removes the key `read` found expired last, when no new state took its place. */
  dropDead(): void {
    const dead = this.#dead;
    if (dead === undefined) return;
    this.#dead = undefined;
    const first = this.#first as Entry;
    this.#unlink(first, dead);
    this.#first = first === dead ? dead.next : first;
  }

  remove(identity: string, entry: Entry): void {
    // A dead key left by an earlier read goes first, so that none is unlinked twice.
    const dead = this.#dead;
    this.dropDead();
    if (entry === dead) return;
    this.#unlink(this.#lookup(identity, this.#hash(identity)) as Entry, entry);
  }

  /** Removes every expired key, then gives back the room of a table left mostly empty. */
  sweep(now: number): void {
    this.dropDead();
    const slots = this.#slots;
    for (let slot = 0; slot < slots.length; slot++) {
      for (let entry = slots[slot]; entry !== undefined; entry = entry.next) {
        if (entry.state.expiresAt <= now) this.#unlink(slots[slot] as Entry, entry);
      }
    }
    const capacity = this.#mask + 1;
    if (capacity > MIN_CAPACITY && this.#filed * 8 < capacity) this.#rebuild(this.#filed * 4);
  }

  clear(): void {
    this.#slots = [];
    this.#free = [];
    this.#filed = 0;
    this.#size = 0;
    this.#hand = 0;
    this.#rebuild(0);
    this.#first = undefined;
    this.#spare = undefined;
    this.#spareState = undefined;
    this.#spareNamespace = undefined;
    this.#dead = undefined;
  }

  /** Seeded, and each character stirred into the whole state before the next comes in. */
  #hash(identity: string): number {
    let h = this.#seed;
    for (let i = 0; i < identity.length; i++) {
      h = Math.imul(h ^ charCodeAt.call(identity, i), 0x5bd1e995);
      h ^= h >>> 15;
    }
    // MurmurHash3's finalizer: the low bits, which pick the place, depend on every bit.
    h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
    h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
    return h ^ (h >>> 16);
  }

  /** The identity's first entry, if filed. */
  #lookup(identity: string, hash: number): Entry | undefined {
    const index = this.#index;
    const mask = this.#mask;
    for (let place = hash & mask; ; place = (place + 1) & mask) {
      const slot = index[2 * place + 1] as number;
      if (slot === 0) return undefined;
      if (index[2 * place] === hash) {
        const first = this.#slots[slot - 1] as Entry;
        if (first.identity === identity) return first;
      }
    }
  }

  /** Gives a new identity, whose first entry is `entry`, a slot and a place in the index. */
  #file(entry: Entry, hash: number): void {
    if (2 * (this.#filed + 1) > this.#mask + 1) this.#rebuild(2 * (this.#filed + 1));
    const slot = this.#free.length > 0 ? (this.#free.pop() as number) : this.#slots.length;
    this.#slots[slot] = entry;
    entry.slot = slot;
    entry.hash = hash;
    this.#place(hash, slot);
    this.#filed++;
  }

  #place(hash: number, slot: number): void {
    const index = this.#index;
    const mask = this.#mask;
    let place = hash & mask;
    while (index[2 * place + 1] !== 0) place = (place + 1) & mask;
    index[2 * place] = hash;
    index[2 * place + 1] = slot + 1;
  }

  /** Takes an identity out of the index and frees its slot; its entries stay as they are. */
  #unfile(first: Entry): void {
    const index = this.#index;
    const mask = this.#mask;
    const held = first.slot + 1;
    let hole = first.hash & mask;
    while (index[2 * hole + 1] !== held) hole = (hole + 1) & mask;
    // Backward shift: pairs after the hole that may sit in it move up, so that no probe stops
    // early at it and no marker of a deleted place ever needs cleaning up.
    for (let at = (hole + 1) & mask; index[2 * at + 1] !== 0; at = (at + 1) & mask) {
      const home = (index[2 * at] as number) & mask;
      if (((at - home) & mask) >= ((at - hole) & mask)) {
        index[2 * hole] = index[2 * at] as number;
        index[2 * hole + 1] = index[2 * at + 1] as number;
        hole = at;
      }
    }
    index[2 * hole] = 0;
    index[2 * hole + 1] = 0;
    this.#slots[first.slot] = undefined;
    this.#free.push(first.slot);
    first.slot = -1;
    this.#filed--;
  }

  /** Removes `entry` from the list that starts with `first`, its identity's. */
  #unlink(first: Entry, entry: Entry): void {
    this.#size--;
    if (first === entry) {
      const next = entry.next;
      if (next === undefined) {
        this.#unfile(entry);
      } else {
        // The next entry stands for the identity now, in the same slot and place.
        next.read = entry.read;
        next.hash = entry.hash;
        next.slot = entry.slot;
        this.#slots[entry.slot] = next;
        entry.slot = -1;
      }
      return;
    }
    let before = first;
    while (before.next !== entry) before = before.next as Entry;
    before.next = entry.next;
  }

  /**
   * Evicts one identity, approximately the least recently used, as the CLOCK algorithm does: a
   * hand goes round the slots, and an identity read since the hand last passed it is spared
   * once. A new identity takes the slot just freed, behind the hand, or one it reaches later.
   */
  #evict(): boolean {
    if (this.#filed === 0) return false;
    const slots = this.#slots;
    for (;;) {
      if (this.#hand >= slots.length) this.#hand = 0;
      const first = slots[this.#hand++];
      if (first === undefined) continue;
      if (!first.read) {
        this.#unfile(first);
        for (let entry: Entry | undefined = first; entry !== undefined; entry = entry.next) {
          this.#size--;
        }
        if (first.next === undefined) this.#spare = first;
        return true;
      }
      first.read = false;
    }
  }

  /**
   * An index of room for `wanted` identities at half full, and the slots packed in the hand's
   * order from the hand on, so that eviction goes on where it was.
   */
  #rebuild(wanted: number): void {
    let capacity = MIN_CAPACITY;
    while (capacity < wanted) capacity *= 2;
    this.#index = new Int32Array(2 * capacity);
    this.#mask = capacity - 1;
    const slots: Entry[] = [];
    const old = this.#slots;
    for (let i = 0; i < old.length; i++) {
      const first = old[(this.#hand + i) % old.length];
      if (first === undefined) continue;
      first.slot = slots.length;
      slots.push(first);
      this.#place(first.hash, first.slot);
    }
    this.#slots = slots;
    this.#free = [];
    this.#hand = 0;
  }
}
