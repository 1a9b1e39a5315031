// The issued API keys, with the keys file read again when it changes: a tenant's tier or own
// limits change without a restart.
import { statSync } from 'node:fs';
import { type GatewayConfig, type KeyOwner, readKeysFile } from './config.ts';

/** How often the keys file's modification time is looked at, at most. */
const CHECK_EVERY_MS = 1000;

export class KeyDirectory {
  readonly #config: GatewayConfig;
  #keys: ReadonlyMap<string, KeyOwner>;
  #mtimeMs: number;
  #checkedAt = 0;
  readonly #onReloadError: (error: unknown) => void;

  constructor(config: GatewayConfig, onReloadError: (error: unknown) => void) {
    this.#config = config;
    this.#keys = config.keys;
    this.#mtimeMs = this.#mtime();
    this.#onReloadError = onReloadError;
  }

  get(key: string): KeyOwner | null {
    this.#reloadIfChanged();
    return this.#keys.get(key) ?? null;
  }

  #mtime(): number {
    const file = this.#config.keysFile;
    if (file === undefined) return 0;
    try {
      return statSync(file.path).mtimeMs;
    } catch {
      return 0;
    }
  }

  #reloadIfChanged(): void {
    const file = this.#config.keysFile;
    const now = Date.now();
    if (file === undefined || now - this.#checkedAt < CHECK_EVERY_MS) return;
    this.#checkedAt = now;
    const mtimeMs = this.#mtime();
    if (mtimeMs === this.#mtimeMs) return;
    this.#mtimeMs = mtimeMs;
    try {
      // The file's keys, then the configuration file's own, which win as they did at start-up.
      const keys = readKeysFile(file);
      for (const [key, owner] of file.inline) keys.set(key, owner);
      this.#keys = keys;
    } catch (error) {
      // A file caught half-written, or broken: the keys read last stay in force.
      this.#onReloadError(error);
    }
  }
}
