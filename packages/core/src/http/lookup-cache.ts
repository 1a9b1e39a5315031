// A bounded, expiring cache of API-key lookups, sharing one pending lookup per key.

export class LookupCache<V> {
  readonly #entries = new Map<string, { value: Promise<V>; expiresAt: number }>();
  readonly #max: number;
  readonly #ttlMs: number;

  constructor(max: number, ttlMs: number) {
    this.#max = max;
    this.#ttlMs = ttlMs;
  }

  /** The cached answer for `key`, or `load`'s, which concurrent callers then share. */
  get(key: string, load: () => Promise<V>): Promise<V> {
    const now = Date.now();
    const hit = this.#entries.get(key);
    if (hit !== undefined) {
      this.#entries.delete(key);
      if (hit.expiresAt > now) {
        this.#entries.set(key, hit);
        return hit.value;
      }
    }
    const value = load();
    const entry = { value, expiresAt: now + this.#ttlMs };
    // A failed lookup is not an answer: forget it so the next request asks again.
    value.catch(() => {
      if (this.#entries.get(key) === entry) this.#entries.delete(key);
    });
    if (this.#entries.size >= this.#max) {
      const oldest = this.#entries.keys().next();
      if (!oldest.done) this.#entries.delete(oldest.value);
    }
    this.#entries.set(key, entry);
    return value;
  }
}
