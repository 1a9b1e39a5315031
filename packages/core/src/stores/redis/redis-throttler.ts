// @nestjs/throttler's storage on Redis: lua/throttler.lua run as a call of a RedisStore, and its
// reply decoded.
import type { ThrottlerInput, ThrottlerRecord } from '../../algorithms/throttler.ts';
import type { RedisStore } from './redis-store.ts';
import { scriptClockOf } from './script-clock.ts';

/** The index of the expiry in the script's arguments (ARGV[2] in lua/throttler.lua). */
const EXPIRY_ARG = 1;

/**
 * Names the fields of the script's reply, its clock taken off: totalHits, timeToExpire,
 * isBlocked (1 or 0) and timeToBlockExpire, in the order lua/throttler.lua returns them.
 */
export function decodeThrottlerReply(reply: readonly number[]): ThrottlerRecord {
  const [totalHits, timeToExpire, isBlocked, timeToBlockExpire] = reply;
  if (reply.length !== 4 || !reply.every(Number.isSafeInteger)) {
    throw new TypeError(`Unexpected throttler script reply ${reply}`);
  }
  return {
    totalHits: totalHits as number,
    timeToExpire: timeToExpire as number,
    isBlocked: isBlocked === 1,
    timeToBlockExpire: timeToBlockExpire as number,
  };
}

/**
 * Counts hits on Redis through `store`, whose deadline each call runs under. Keys are
 * `<prefix>:throttler:{<key>}` for a key's record and `…:<throttler name>` for its hits, so
 * both share the key's hash tag and one script can take them on a Cluster.
 */
export class RedisThrottler {
  readonly #store: RedisStore;
  readonly #prefix: string;

  constructor(store: RedisStore, prefix: string) {
    this.#store = store;
    this.#prefix = prefix;
  }

  /** The keys of `name`'s hits under `key`: its record's, then the hits'. */
  keysOf(key: string, name: string): [string, string] {
    const record = `${this.#prefix}:throttler:{${key}}`;
    return [record, `${record}:${name}`];
  }

  /** The server that holds `key`, for a breaker per Cluster master: see Store.serverOf. */
  serverOf(key: string, name: string): string {
    return this.#store.serverOf(this.keysOf(key, name));
  }

  async increment(
    key: string,
    name: string,
    { ttl, limit, blockDuration }: Omit<ThrottlerInput, 'now'>,
  ): Promise<ThrottlerRecord> {
    // Redis's clock, but in this repository's tests, which may step a clock of their own.
    const now = scriptClockOf(this.#store)?.();
    const args = [
      now === undefined ? '' : String(now),
      '',
      String(ttl),
      String(limit),
      String(blockDuration),
    ];
    const reply = await this.#store.runScript(
      'throttler',
      this.keysOf(key, name),
      args,
      EXPIRY_ARG,
    );
    return decodeThrottlerReply(reply);
  }

  close(): void {
    this.#store.close();
  }
}
