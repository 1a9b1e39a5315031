// Which servers the HTTP suite can start: per framework, the bare app, the one-call floor, Sentinel
// as three kinds of user set it up, and that framework's usual Redis-backed peers. Shared by the
// suite and the server entry point.
export const FRAMEWORKS = [
  'express',
  'koa',
  'fastify',
  'hono',
  'nest-express',
  'nest-fastify',
] as const;
export type Framework = (typeof FRAMEWORKS)[number];

/** Nest on each of its platforms: compiled with decorator metadata, and measured as users write Sentinel. */
export const NEST_FRAMEWORKS = [
  'nest-express',
  'nest-fastify',
] as const satisfies readonly Framework[];
export type NestFramework = (typeof NEST_FRAMEWORKS)[number];

export function isNest(framework: Framework): framework is NestFramework {
  return (NEST_FRAMEWORKS as readonly Framework[]).includes(framework);
}

/** What runs a server: Node, or Bun for Hono's row on Bun. The load always comes from Node. */
export type Runtime = 'node' | 'bun';

export const PEERS = {
  express: ['express-rate-limit', 'rate-limiter-flexible'],
  koa: ['koa-ratelimit'],
  fastify: ['@fastify/rate-limit'],
  hono: ['hono-rate-limiter'],
  'nest-express': ['@nestjs/throttler'],
  'nest-fastify': ['@nestjs/throttler'],
} as const satisfies Record<Framework, readonly string[]>;

/**
 * Sentinel's set-ups: `sentinel`, its defaults and `redisUrl` (identity by IP); `sentinel-by-key`,
 * `redisUrl` and a synchronous `identify` that takes the `x-api-key` header as it comes;
 * `sentinel-own-client`, that `identify` and the app's own ioredis client (`redis`).
 */
export const SENTINELS = ['sentinel', 'sentinel-by-key', 'sentinel-own-client'] as const;
export type SentinelVariant = (typeof SENTINELS)[number];

/**
 * The quota-lease suite's: `sentinel-leases`, Sentinel as users write it (`sentinel-own-client`)
 * with `quotaLeases: true`; and `bare-headers`, the bare app setting the `RateLimit` headers
 * Sentinel sets by hand, the bound of any limiter that sends them.
 */
export const LEASE_VARIANTS = ['sentinel-leases', 'bare-headers'] as const;
export type LeaseVariant = (typeof LEASE_VARIANTS)[number];

export type Variant =
  | 'bare'
  | 'floor'
  | SentinelVariant
  | LeaseVariant
  | (typeof PEERS)[Framework][number];

export function variantsOf(framework: Framework): readonly Variant[] {
  // Nest's app sets Sentinel up one way: its own ioredis client, one hot key.
  const sentinels = isNest(framework) ? (['sentinel-own-client'] as const) : SENTINELS;
  return ['bare', 'floor', ...sentinels, ...PEERS[framework]];
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
