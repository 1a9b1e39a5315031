// The embedded store: the same algorithms as the Lua scripts, run in process, with bounded memory.
import { evaluators, type KeyState, type PolicyInput, type Slot } from './algorithms/index.ts';
import { EPOCH_MS } from './scripts.generated.ts';
import type { PolicyOutcome, Store, StoreReply, StoreRequest } from './types.ts';
import { checkPositiveInteger, describe, fail, rejectUnknownOptions } from './validation.ts';

export interface MemoryStoreOptions {
  /**
   * Keys kept at most; past it the least recently used key is evicted.
   * @default 100_000
   */
  maxKeys?: number;
  /**
   * How often expired keys are swept, in milliseconds. The timer never keeps the process alive.
   * @default 60_000
   */
  sweepIntervalMs?: number;
}

export class MemoryStore implements Store {
  readonly #keys = new Map<string, KeyState>();
  /** Reused by every evaluation: evaluate is synchronous, so one at a time uses them. */
  readonly #input: PolicyInput = { limit: 0, windowMs: 0, cost: 0, now: 0, apply: false };
  readonly #slot: Slot<KeyState> = { state: undefined };
  readonly #maxKeys: number;
  readonly #sweeper: NodeJS.Timeout;
  /** Requests' clock minus the real one: keys expire on the clock their requests carry. */
  #clockOffset = 0;

  constructor(options: MemoryStoreOptions = {}) {
    if (typeof options !== 'object' || options === null) {
      fail('options', `must be an object, got ${describe(options)}`);
    }
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
        this.#insert(key, next);
      }
    }
    return { allowed, policies: outcomes };
  }

  /** The live state of a key, marked most recently used; an expired key reads as absent. */
  #read(key: string, now: number): KeyState | undefined {
    const state = this.#keys.get(key);
    if (state === undefined) return undefined;
    this.#keys.delete(key);
    if (state.expiresAt <= now) return undefined;
    this.#keys.set(key, state);
    return state;
  }

  #insert(key: string, state: KeyState): void {
    if (this.#keys.size >= this.#maxKeys) {
      // Map order is use order: the first key is the least recently used.
      const oldest = this.#keys.keys().next();
      if (!oldest.done) this.#keys.delete(oldest.value);
    }
    this.#keys.set(key, state);
  }

  #sweep(now: number): void {
    for (const [key, state] of this.#keys) {
      if (state.expiresAt <= now) this.#keys.delete(key);
    }
  }
}
