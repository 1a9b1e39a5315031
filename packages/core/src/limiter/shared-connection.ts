// One Redis client built from `redisUrl` for several limiters: an adapter and the routes it
// limits, or a limiter and its ban counter, which would otherwise each open a connection.
import { createRedisClient } from '../stores/redis/client.ts';
import { toRedisConnection } from '../stores/redis/connection.ts';
import type { LimiterOptions } from './options.ts';

/** Options with one Redis client for every limiter built from them. */
export interface SharedConnection<Options> {
  /** The options to build with: `redisUrl` replaced by `redis`, the client built from it. */
  readonly options: Options;
  /** Closes that client, once however often it is called; nothing when none was built. */
  close(): Promise<void>;
}

/**
 * From `redisUrl`, each limiter would build a Redis client, and so each route an adapter limits
 * by its own options would open a connection of its own, as would a ban counter. The caller
 * builds the one they share instead, and closes it after them. Options with `redis` or `store`
 * beside `redisUrl`, which the limiter refuses by name, pass as they are, as do options without
 * `redisUrl`.
 */
export function connectOnce<Options extends Pick<LimiterOptions, 'store' | 'redis' | 'redisUrl'>>(
  options: Options,
): SharedConnection<Options> {
  const { redisUrl, redis, store } = options;
  if (redisUrl === undefined || redis !== undefined || store !== undefined) {
    return { options, close: () => Promise.resolve() };
  }
  const client = createRedisClient(redisUrl);
  const { redisUrl: _, ...rest } = options;
  let closed: Promise<void> | undefined;
  return {
    options: { ...rest, redis: client } as Options,
    close: () => {
      closed ??= toRedisConnection(client).close();
      return closed;
    },
  };
}
