// Which servers the HTTP suite can start: per framework, the bare app, the one-call floor, Sentinel
// as three kinds of user set it up, and that framework's usual Redis-backed peers. Shared by the
// suite and the server entry point.
export const FRAMEWORKS = ['express', 'koa', 'fastify', 'hono'] as const;
export type Framework = (typeof FRAMEWORKS)[number];

/** What runs a server: Node, or Bun for Hono's row on Bun. The load always comes from Node. */
export type Runtime = 'node' | 'bun';

export const PEERS = {
  express: ['express-rate-limit', 'rate-limiter-flexible'],
  koa: ['koa-ratelimit'],
  fastify: ['@fastify/rate-limit'],
  hono: ['hono-rate-limiter'],
} as const satisfies Record<Framework, readonly string[]>;

/**
 * Sentinel's set-ups: `sentinel`, its defaults and `redisUrl` (identity by IP); `sentinel-by-key`,
 * `redisUrl` and a synchronous `identify` that takes the `x-api-key` header as it comes;
 * `sentinel-own-client`, that `identify` and the app's own ioredis client (`redis`).
 */
export const SENTINELS = ['sentinel', 'sentinel-by-key', 'sentinel-own-client'] as const;
export type SentinelVariant = (typeof SENTINELS)[number];

export type Variant = 'bare' | 'floor' | SentinelVariant | (typeof PEERS)[Framework][number];

export function variantsOf(framework: Framework): readonly Variant[] {
  return ['bare', 'floor', ...SENTINELS, ...PEERS[framework]];
}

export function isSentinel(variant: Variant): variant is SentinelVariant {
  return (SENTINELS as readonly Variant[]).includes(variant);
}

/** Every limiter runs at this many requests a minute, so nothing is refused and each does its full work. */
export const HUGE_LIMIT = 1e9;
export const WINDOW_MS = 60_000;

/** The header the load keys requests by: the floor and Sentinel's `identify` by key read it. */
export const API_KEY_HEADER = 'x-api-key';

/** A running server, as each framework's app module hands it back. */
export interface Running {
  readonly port: number;
  close(): Promise<void>;
}
