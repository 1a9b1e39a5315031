// @sentinel/fastify: the Fastify plugin, and the core helpers and types it is configured with.
export {
  type Algorithm,
  type ApiKeyOptions,
  type ApiKeyTenant,
  byApiKey,
  byHeader,
  byIp,
  chain,
  type Decision,
  type HeaderFormat,
  type Identifier,
  type IdentifyResult,
  type Identity,
  type IpOptions,
  MemoryStore,
  type PolicyDecision,
  type PolicyOptions,
  type ProblemDetails,
  RedisStore,
  SentinelError,
  type TierOptions,
  type Window,
} from '@sentinel/core';
export { sentinel, sentinel as default } from './plugin.ts';
export type {
  RateLimitHook,
  RefusalHandler,
  RouteRateLimitOptions,
  SentinelHook,
  SentinelOptions,
} from './types.ts';
export { SENTINEL_HOOKS } from './types.ts';
