// The configuration as the service reads it: once at start, then again whenever its files change.
import { type FSWatcher, realpathSync, statSync, watch } from 'node:fs';
import { basename, dirname } from 'node:path';
import type { RateLimitConfig } from '../types.ts';
import { ConfigError } from './config-error.ts';
import { type ConfigSource, collect } from './config-source.ts';
import { type LoadOptions, loadConfig } from './load-config.ts';

export { type ConfigSource, configSource } from './config-source.ts';

/** The configuration the source holds now: what the service starts with. */
export async function readConfig(
  source: ConfigSource,
  options: LoadOptions = {},
): Promise<RateLimitConfig> {
  return loadConfig((await collect(source)).texts, options);
}

/** What {@link watchConfig} returns: close it to stop watching. */
export interface ConfigWatcher {
  close(): void;
}

/**
 * How long changes settle before the files are read again: one save by an editor, or one swap
 * of RUNTIME_ROOT by a deployment, is several events.
 */
const SETTLE_MS = 100;

/**
 * Reloads the configuration when its files change: a file written, added or removed in a
 * configuration directory (or beside a `--config` file), or RUNTIME_ROOT swapped for another
 * directory. A reload whose files read the same as the last reports nothing. One that fails
 * calls `onError` and nothing else: the caller keeps the configuration it has, the last good
 * one. Neither is called after `close()`.
 * @example watchConfig(source, {}, (config) => { current = config }, (error) => log.error(error.message))
 */
export function watchConfig(
  source: ConfigSource,
  options: LoadOptions,
  onLoad: (config: RateLimitConfig) => void,
  onError: (error: ConfigError) => void,
): ConfigWatcher {
  return new ConfigWatch(source, options, onLoad, onError);
}

class ConfigWatch implements ConfigWatcher {
  /** A watcher per directory, with which directory it watches (see `identity`). */
  readonly #watchers = new Map<string, { id: string; watcher: FSWatcher }>();
  readonly #rootWatcher: FSWatcher | undefined;
  #timer: NodeJS.Timeout | undefined;
  #reading = false;
  #changedWhileReading = false;
  #closed = false;
  /** The texts last read, loaded or refused: a reload that finds them again reports nothing. */
  #lastTexts: string | undefined;

  constructor(
    private readonly source: ConfigSource,
    private readonly options: LoadOptions,
    private readonly onLoad: (config: RateLimitConfig) => void,
    private readonly onError: (error: ConfigError) => void,
  ) {
    this.#watch(topDirectories(source));
    if (source.kind === 'directory') {
      // Upstream's way to publish: RUNTIME_ROOT, a symlink, swapped in its parent directory.
      this.#rootWatcher = this.#open(dirname(source.root), (name) => {
        if (name === null || name === basename(source.root)) this.#schedule();
      });
    }
    // Watches the subdirectories, and notes what the files say now, without reporting it.
    void this.#reload(false);
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#rootWatcher?.close();
    for (const { watcher } of this.#watchers.values()) watcher.close();
    this.#watchers.clear();
  }

  #schedule(): void {
    if (this.#closed) return;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => void this.#reload(true), SETTLE_MS);
  }

  /** One read at a time; changes seen meanwhile read again once it is done. */
  async #reload(report: boolean): Promise<void> {
    if (this.#reading) {
      this.#changedWhileReading = true;
      return;
    }
    this.#reading = true;
    let outcome: { config: RateLimitConfig } | { error: ConfigError } | undefined;
    try {
      const { texts, directories } = await collect(this.source);
      if (this.#closed) return;
      this.#watch(directories);
      const seen = JSON.stringify(texts);
      if (seen !== this.#lastTexts) {
        this.#lastTexts = seen;
        if (report) outcome = { config: loadConfig(texts, this.options) };
      }
    } catch (error) {
      outcome = { error: asConfigError(error, this.source) };
      // The directory may be gone: stop watching what is not there any more.
      if (!this.#closed) this.#watch(topDirectories(this.source));
    } finally {
      this.#reading = false;
      if (this.#changedWhileReading) {
        this.#changedWhileReading = false;
        this.#schedule();
      }
    }
    if (!report || this.#closed || outcome === undefined) return;
    if ('config' in outcome) this.onLoad(outcome.config);
    else this.onError(outcome.error);
  }

  /**
   * Watches exactly `directories`. One that is now another directory (removed and made again,
   * or a symlink above it swapped) is watched afresh: a watch follows the one it was opened on.
   */
  #watch(directories: readonly string[]): void {
    const wanted = new Map(directories.map((directory) => [directory, identity(directory)]));
    for (const [directory, { id, watcher }] of this.#watchers) {
      if (wanted.get(directory) !== id) {
        watcher.close();
        this.#watchers.delete(directory);
      }
    }
    for (const [directory, id] of wanted) {
      if (id === undefined || this.#watchers.has(directory)) continue;
      const watcher = this.#open(directory, () => this.#schedule());
      if (watcher !== undefined) this.#watchers.set(directory, { id, watcher });
    }
  }

  /** Undefined where the directory is gone: the next reload reports it, if it matters. */
  #open(directory: string, onChange: (name: string | null) => void): FSWatcher | undefined {
    try {
      const watcher = watch(directory, { persistent: false }, (_event, name) => onChange(name));
      // A watch that fails has ended: forget it, and read again, which watches what is there.
      watcher.on('error', () => {
        watcher.close();
        for (const [watched, entry] of this.#watchers) {
          if (entry.watcher === watcher) this.#watchers.delete(watched);
        }
        this.#schedule();
      });
      return watcher;
    } catch {
      return undefined;
    }
  }
}

/** The directories watched from the start: each file's, or the configuration directory. */
function topDirectories(source: ConfigSource): string[] {
  return source.kind === 'files' ? source.files.map((file) => dirname(file)) : [source.directory];
}

/** Which directory a path names now: its real path and inode; undefined where there is none. */
function identity(directory: string): string | undefined {
  try {
    return `${realpathSync(directory)}#${statSync(directory).ino}`;
  } catch {
    return undefined;
  }
}

function asConfigError(error: unknown, source: ConfigSource): ConfigError {
  if (error instanceof ConfigError) return error;
  const where = source.kind === 'files' ? source.files.join(', ') : source.directory;
  return new ConfigError(where, undefined, reason(error));
}

function reason(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
