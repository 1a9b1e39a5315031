// The embedded store: the same algorithms as the Lua scripts, run in process, with bounded memory.
import { evaluators, type KeyState, type PolicyInput, type Slot } from './algorithms/index.ts';
import { EPOCH_MS } from './scripts.generated.ts';
import type { PolicyOutcome, Store, StoreReply, StoreRequest } from './types.ts';
import { checkObject, checkPositiveInteger, rejectUnknownOptions } from './validation.ts';

export interface MemoryStoreOptions {
  /**
   * Keys kept at most; past it a key not used lately is evicted (approximately the least
   * recently used one, as Redis's `allkeys-lru` does).
   * @default 100_000
   */
  maxKeys?: number;
  /**
   * How often expired keys are swept, in milliseconds. The timer never keeps the process alive.
   * @default 60_000
   */
  sweepIntervalMs?: number;
}

/** Marks a state read since eviction last passed it by; a symbol, so no algorithm's field clashes. */
const READ = Symbol('read');

/** A state as the store holds it. */
type Tracked = KeyState & { [READ]: boolean };

export class MemoryStore implements Store {
  readonly #keys = new Map<string, KeyState>();
  /** Reused by every evaluation: evaluate is synchronous, so one at a time uses them. */
  readonly #input: PolicyInput = { limit: 0, windowMs: 0, cost: 0, now: 0, apply: false };
  readonly #slot: Slot<KeyState> = { state: undefined };
  readonly #maxKeys: number;
  /** Where eviction goes on from: see #evict. */
  #hand: MapIterator<[string, KeyState]> = this.#keys.entries();
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
    return this.#keys.size;
  }

  evaluate(request: StoreRequest): StoreReply {
    const real = Date.now();
    this.#clockOffset = request.now === undefined ? 0 : request.now - real;
    const now = (request.now ?? real) - EPOCH_MS;
    // Same two passes as lua/evaluate.lua: several policies look first, then all consume or none.
    if (request.keys.length === 1 || !request.apply) return this.#run(request, now, request.apply);
    const look = this.#run(request, now, false);
    return look.allowed ? this.#run(request, now, true) : look;
  }

  reset(keys: readonly string[]): void {
    for (const key of keys) this.#keys.delete(key);
  }

  close(): void {
    clearInterval(this.#sweeper);
    this.#keys.clear();
  }

  #run({ keys, policies, cost }: StoreRequest, now: number, apply: boolean): StoreReply {
    const outcomes: PolicyOutcome[] = new Array(keys.length);
    let allowed = true;
    const input = this.#input;
    input.cost = cost;
    input.now = now;
    input.apply = apply;
    const slot = this.#slot;
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i] as string;
      const policy = policies[i];
      if (policy === undefined) throw new TypeError('@sentinel/core: one key per policy');
      const stored = this.#read(key, now);
      input.limit = policy.limit;
      input.windowMs = policy.windowMs;
      slot.state = stored;
      const outcome = evaluators[policy.algorithm](input, slot);
      const next = slot.state;
      slot.state = undefined;
      outcomes[i] = outcome;
      if (!outcome.allowed) allowed = false;
      if (next === undefined) {
        if (stored !== undefined) this.#keys.delete(key);
      } else if (next !== stored) {
        this.#insert(key, next, stored !== undefined);
      }
    }
    return { allowed, policies: outcomes };
  }

  /**
   * The live state of a key, marked used; an expired key reads as absent. Marking is one field
   * write: keeping the Map in exact use order would cost a delete and an insert per read.
   */
  #read(key: string, now: number): KeyState | undefined {
    const state = this.#keys.get(key) as Tracked | undefined;
    if (state === undefined) return undefined;
    if (state.expiresAt <= now) {
      // Gone for good, as in Redis: a later request with an earlier clock must not revive it.
      this.#keys.delete(key);
      return undefined;
    }
    state[READ] = true;
    return state;
  }

  /** Stores a key's new state; one replacing a live state keeps its place, as just used. */
  #insert(key: string, state: KeyState, replacing: boolean): void {
    (state as Tracked)[READ] = replacing;
    if (!replacing && this.#keys.size >= this.#maxKeys) this.#evict();
    this.#keys.set(key, state);
  }

  /**
   * Evicts one key, approximately the least recently used, as the CLOCK algorithm does: a hand
   * goes round the keys in insertion order, and a key read since the hand last passed it is
   * spared once. The hand is one iterator kept across evictions: a fresh one would walk past
   * every key deleted at the front of the Map since it last compacted, which under a flood of
   * new keys is most of it.
   */
  #evict(): void {
    for (;;) {
      let next = this.#hand.next();
      if (next.done) {
        this.#hand = this.#keys.entries();
        next = this.#hand.next();
        if (next.done) return;
      }
      const [key, state] = next.value as [string, Tracked];
      if (!state[READ]) {
        this.#keys.delete(key);
        return;
      }
      state[READ] = false;
    }
  }

  #sweep(now: number): void {
    for (const [key, state] of this.#keys) {
      if (state.expiresAt <= now) this.#keys.delete(key);
    }
  }
}
