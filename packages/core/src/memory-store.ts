// The embedded store: the same algorithms as the Lua scripts, run in process, with bounded memory.
import { evaluators, type State } from './algorithms/index.ts';
import { EPOCH_MS } from './scripts.generated.ts';
import type { Store, StoreReply, StoreRequest } from './types.ts';

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
  readonly #keys = new Map<string, State>();
  readonly #maxKeys: number;
  readonly #sweeper: NodeJS.Timeout;
  /** Requests' clock minus the real one: keys expire on the clock their requests carry. */
  #clockOffset = 0;

  constructor({ maxKeys = 100_000, sweepIntervalMs = 60_000 }: MemoryStoreOptions = {}) {
    if (!Number.isSafeInteger(maxKeys) || maxKeys < 1) {
      throw new TypeError(`@sentinel/core: \`maxKeys\` must be a positive integer, got ${maxKeys}`);
    }
    if (!Number.isSafeInteger(sweepIntervalMs) || sweepIntervalMs < 1) {
      throw new TypeError(
        `@sentinel/core: \`sweepIntervalMs\` must be a positive integer, got ${sweepIntervalMs}`,
      );
    }
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
    return look[0] === 0 ? look : this.#run(request, now, true);
  }

  reset(keys: readonly string[]): void {
    for (const key of keys) this.#keys.delete(key);
  }

  close(): void {
    clearInterval(this.#sweeper);
    this.#keys.clear();
  }

  #run({ keys, policies, cost }: StoreRequest, now: number, apply: boolean): number[] {
    const reply = [1];
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i] as string;
      const policy = policies[i];
      if (policy === undefined) throw new TypeError('@sentinel/core: one key per policy');
      const stored = this.#read(key, now);
      const out = 4 * i + 1;
      const next = evaluators[policy.algorithm](
        stored,
        policy.limit,
        policy.windowMs,
        cost,
        now,
        apply,
        reply,
        out,
      );
      if (reply[out] === 0) reply[0] = 0;
      if (next === undefined) {
        if (stored !== undefined) this.#keys.delete(key);
      } else if (next !== stored) {
        this.#insert(key, next);
      }
    }
    return reply;
  }

  /** The live state of a key, marked most recently used; an expired key reads as absent. */
  #read(key: string, now: number): State | undefined {
    const state = this.#keys.get(key);
    if (state === undefined) return undefined;
    this.#keys.delete(key);
    if (state.expiresAt <= now) return undefined;
    this.#keys.set(key, state);
    return state;
  }

  #insert(key: string, state: State): void {
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
