// Option names of other Node rate limiters, each with what Sentinel calls it, for migration errors.

const EXPRESS = 'express-rate-limit';
const FASTIFY = '@fastify/rate-limit';
const KOA = 'koa-ratelimit';
const FLEXIBLE = 'rate-limiter-flexible';
const HONO = 'hono-rate-limiter';
const NEST = '@nestjs/throttler';

interface PeerOption {
  /** The libraries that use the name. */
  readonly peers: readonly string[];
  /** What to write instead; absent when Sentinel has no equivalent yet. */
  readonly use?: string;
}

const WINDOW = "`window`, in milliseconds or a string such as '15m'";
const IDENTIFY = '`identify`, a function of the request that returns `{ key, tier? }`';
const CLIENT = '`redis` (an ioredis, iovalkey or node-redis client) or `redisUrl`';
const HEADERS = "`headers`: 'draft-11', 'draft-7' or 'draft-6'";
const HANDLER = '`handler`, which replaces the 429 answer';

/**
 * Names from the documented options of express-rate-limit 7–8, @fastify/rate-limit 10,
 * koa-ratelimit 6, rate-limiter-flexible 7, hono-rate-limiter 0.5 and @nestjs/throttler 6 (its
 * `ThrottlerModule.forRoot()` and `@Throttle()` options), and a few their older versions used
 * (`whitelist`, `inmemoryBlockOnConsumed`), since migration guides still show them. A name
 * Sentinel uses itself (`store`, `redis`, `skip`, `headers`, `allowList`, `onLimited`,
 * `handler`, `hook`, `global`, `prefix`, `skipSuccessfulRequests`, `skipFailedRequests`,
 * `requestWasSuccessful`, `ban`, and @nestjs/throttler's `limit` and `name`) is not here: it is a
 * known option wherever Sentinel takes it.
 */
export const PEER_OPTION_NAMES: Readonly<Record<string, PeerOption>> = {
  windowMs: { peers: [EXPRESS, HONO], use: WINDOW },
  timeWindow: { peers: [FASTIFY], use: WINDOW },
  // koa-ratelimit counts it in milliseconds, rate-limiter-flexible in seconds.
  duration: { peers: [KOA, FLEXIBLE], use: WINDOW },
  max: { peers: [EXPRESS, FASTIFY, KOA], use: '`limit`' },
  points: { peers: [FLEXIBLE], use: '`limit`' },
  keyGenerator: { peers: [EXPRESS, FASTIFY, HONO], use: IDENTIFY },
  id: { peers: [KOA], use: IDENTIFY },
  ipv6Subnet: { peers: [EXPRESS], use: '`identify: byIp({ ipv6Subnet })`' },
  keyPrefix: { peers: [FLEXIBLE], use: '`prefix`' },
  nameSpace: { peers: [FASTIFY], use: '`prefix`' },
  groupId: { peers: [FASTIFY], use: '`group`' },
  identifier: { peers: [EXPRESS], use: "a policy's `name`" },
  db: { peers: [KOA], use: CLIENT },
  storeClient: { peers: [FLEXIBLE], use: CLIENT },
  driver: { peers: [KOA], use: '`store`, `redis` or `redisUrl`; without them, state is in memory' },
  storeType: { peers: [FLEXIBLE], use: '`store`, `redis` or `redisUrl`' },
  cache: { peers: [FASTIFY], use: '`store: new MemoryStore({ maxKeys })`' },
  standardHeaders: { peers: [EXPRESS, HONO], use: HEADERS },
  enableDraftSpec: { peers: [FASTIFY], use: HEADERS },
  addHeaders: { peers: [FASTIFY], use: HEADERS },
  addHeadersOnExceeding: { peers: [FASTIFY], use: HEADERS },
  legacyHeaders: { peers: [EXPRESS], use: "`headers` with 'legacy', as in ['draft-11', 'legacy']" },
  disableHeader: { peers: [KOA], use: '`headers: false`' },
  message: { peers: [EXPRESS, HONO], use: HANDLER },
  statusCode: { peers: [EXPRESS, HONO], use: HANDLER },
  errorResponseBuilder: { peers: [FASTIFY], use: HANDLER },
  errorMessage: { peers: [KOA], use: HANDLER },
  throw: { peers: [KOA], use: HANDLER },
  whitelist: { peers: [KOA, FASTIFY], use: '`allowList` (IPs or CIDR ranges) or `skip(req)`' },
  onExceeded: { peers: [FASTIFY], use: '`onLimited`' },
  passOnStoreError: { peers: [EXPRESS], use: "`onStoreError: 'allow'`, the default" },
  skipOnError: { peers: [FASTIFY], use: "`onStoreError: 'allow'`, the default" },
  insuranceLimiter: { peers: [FLEXIBLE], use: "`onStoreError: 'local'`" },
  blacklist: { peers: [KOA] },
  blockDuration: {
    peers: [FLEXIBLE],
    use: "a policy's `blockFor`, in ms or a string such as '15m'",
  },
  inMemoryBlockOnConsumed: { peers: [FLEXIBLE], use: '`blockCache: true`' },
  inMemoryBlockDuration: { peers: [FLEXIBLE] },
  inmemoryBlockOnConsumed: { peers: [FLEXIBLE], use: '`blockCache: true`' },
  inmemoryBlockDuration: { peers: [FLEXIBLE] },
  execEvenly: { peers: [FLEXIBLE] },
  execEvenlyMinDelayMs: { peers: [FLEXIBLE] },
  onBanReach: { peers: [FASTIFY] },
  onExceeding: { peers: [FASTIFY] },
  continueExceeding: { peers: [FASTIFY] },
  exponentialBackoff: { peers: [FASTIFY] },
  requestPropertyName: {
    peers: [EXPRESS, HONO],
    use: '`contextKey` with @sentinel/hono; Express, Koa and Fastify always set `rateLimit`',
  },
  requestStorePropertyName: { peers: [HONO], use: "the middleware's `limiter`" },
  binding: { peers: [HONO], use: '`store`, `redis` or `redisUrl`' },
  // @nestjs/throttler counts `ttl` and `blockDuration` in milliseconds, as Sentinel does.
  ttl: { peers: [NEST], use: WINDOW },
  throttlers: { peers: [NEST], use: '`policies`, a list of `{ name, limit, window }`' },
  getTracker: { peers: [NEST], use: IDENTIFY },
  generateKey: {
    peers: [NEST],
    use: '`identify` for whom a request counts, and `group` for the routes that share a budget',
  },
  skipIf: { peers: [NEST], use: '`skip`, a function of the request' },
  ignoreUserAgents: { peers: [NEST], use: "`skip`, testing the request's `user-agent` header" },
  setHeaders: { peers: [NEST], use: "`headers: false` for none, or a format such as 'draft-11'" },
  storage: { peers: [NEST], use: '`store`, `redis` or `redisUrl`' },
  ipv6SubnetPrefix: { peers: [NEST], use: '`identify: byIp({ ipv6Subnet })`' },
};

/** What to tell someone who wrote a peer's option name, or undefined for any other name. */
export function peerOptionAdvice(name: string): string | undefined {
  if (!Object.hasOwn(PEER_OPTION_NAMES, name)) return undefined;
  const { peers, use } = PEER_OPTION_NAMES[name] as PeerOption;
  const whose =
    peers.length === 1
      ? `${peers[0]}'s name`
      : `the name in ${peers.slice(0, -1).join(', ')} and ${peers.at(-1)}`;
  return use === undefined
    ? `is ${whose}; Sentinel has no equivalent yet`
    : `is ${whose}: use ${use}`;
}
