// One Redis client built from `redisUrl` for several limiters: an adapter and the routes it
// limits, or a limiter and its ban counter, which would otherwise each open a connection.
import { createRedisClient } from '../stores/redis/client.ts';
import { toRedisConnection } from '../stores/redis/connection.ts';
import { type LimiterOptions, redisStore } from './options.ts';

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

/**
 * Options with one RedisStore on their `redis` client for every limiter built from them, rather
 * than one per limiter: calls the limiters send in one tick then go to Redis in one batch, as
 * the releases of a request's own slots and of the fleet's do when its response ends. Options
 * with `store`, or without `redis`, pass as they are: the memory store is one per process, and
 * options that name both a store and a client are refused by the limiter, by name.
 */
export function storeOnce(options: LimiterOptions): SharedConnection<LimiterOptions> {
  const { store, redis, redisUrl, timeout, connectTimeout, ...rest } = options;
  if (redis === undefined || store !== undefined || redisUrl !== undefined) {
    return { options, close: () => Promise.resolve() };
  }
  // Checked here so that the error names `redis`, as the limiter's own check does.
  toRedisConnection(redis, 'redis');
  const shared = redisStore(redis, timeout, connectTimeout);
  return {
    options: { ...rest, store: shared },
    // The client stays open: it is the caller's, or connectOnce's to close.
    close: () => Promise.resolve(shared.close()),
  };
}
