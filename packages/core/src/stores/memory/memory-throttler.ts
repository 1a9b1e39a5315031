// @nestjs/throttler's storage in process memory: the twin of lua/throttler.lua on a bounded table.
import {
  type ThrottlerInput,
  type ThrottlerRecord,
  type ThrottlerState,
  throttlerIncrement,
} from '../../algorithms/throttler.ts';
import { EPOCH_MS } from '../../shared/lua-constants.generated.ts';
import { IdentityTable } from './identity-table.ts';

/** Every key's state is filed whole, under one namespace. */
const NAMESPACE = '';

export interface MemoryThrottlerOptions {
  /** Keys kept at most; past it, keys not used lately are evicted. @default 100_000 */
  readonly maxKeys?: number;
  /** How often keys that count nothing any more are swept, in ms. @default 60_000 */
  readonly sweepIntervalMs?: number;
  /** The time, in Unix ms, for this repository's tests. @default Date.now */
  readonly clock?: () => number;
}

/**
 * Keys and their throttlers' hits in this process, counted as Redis counts them, with memory
 * bounded as the memory store's: its IdentityTable evicts the keys not used lately past
 * `maxKeys`, where ThrottlerStorageService keeps every key until it has been idle a minute.
 */
export class MemoryThrottler {
  readonly #table: IdentityTable;
  readonly #clock: () => number;
  readonly #sweeper: NodeJS.Timeout;

  constructor({ maxKeys = 100_000, sweepIntervalMs = 60_000, clock }: MemoryThrottlerOptions = {}) {
    this.#table = new IdentityTable(maxKeys);
    this.#clock = clock ?? Date.now;
    this.#sweeper = setInterval(() => this.#table.sweep(this.#now()), sweepIntervalMs);
    this.#sweeper.unref();
  }

  /** Keys held now, expired ones included until they are swept or read. */
  get size(): number {
    return this.#table.size;
  }

  /** One increment of `name`'s hits under `key`, now by this store's clock. */
  increment(key: string, name: string, input: Omit<ThrottlerInput, 'now'>): ThrottlerRecord {
    const now = this.#now();
    const entry = this.#table.read(key, NAMESPACE, now);
    const { state, record } = throttlerIncrement(entry?.state as ThrottlerState | undefined, name, {
      ...input,
      now,
    });
    if (entry === undefined) this.#table.insertAfterRead(key, NAMESPACE, state);
    return record;
  }

  close(): void {
    clearInterval(this.#sweeper);
    this.#table.clear();
  }

  #now(): number {
    return this.#clock() - EPOCH_MS;
  }
}
