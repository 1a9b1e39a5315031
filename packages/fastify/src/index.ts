// @sentinel/fastify: the Fastify plugin, and the core helpers and types it is configured with.
export * from '@sentinel/core/adapter';
export { sentinel, sentinel as default } from './plugin.ts';
export type {
  RateLimitHook,
  RefusalHandler,
  RouteRateLimitOptions,
  SentinelHook,
  SentinelLimiters,
  SentinelOptions,
} from './types.ts';
export { SENTINEL_HOOKS } from './types.ts';
