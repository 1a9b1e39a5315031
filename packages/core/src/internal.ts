// What the adapters and the bench build on besides the public API: not for applications, and free
// to change.

export {
  adapterLimiter,
  adapterOptions,
  handlerAnswers,
  type RouteLayering,
  routeLayering,
} from './http/adapter-options.ts';
export {
  abandoned,
  admitted,
  type FetchRequestFields,
  following,
  RequestFields,
  refusal,
  runtimeAddress,
} from './http/fetch-exchange.ts';
export type { FetchRequestLike, HeaderRecord } from './http/fetch-request.ts';
export type { ResponseEnd } from './http/fetch-response.ts';
export {
  type HttpLimiter,
  mergeHttpLimiterOptions,
  type NodeResponse,
  type Verdict,
} from './http/http-limiter.ts';
export { resolveTrustProxy, type TrustProxy } from './http/trust-proxy.ts';
export { connectOnce, type SharedConnection } from './limiter/shared-connection.ts';
// @nestjs/throttler's storage, which @sentinel/nestjs wraps: lua/throttler.lua and its memory twin.
export {
  ThrottlerCounter,
  type ThrottlerCounterOptions,
  type ThrottlerRecord,
} from './limiter/throttler-counter.ts';
export { checkFunction, checkObject, checkOneOf, describe, fail } from './shared/validation.ts';
// sentinel-rls's client for REDIS_TYPE=sentinel.
export {
  createRedisSentinelClient,
  type RedisCredentials,
  type RedisSentinelTarget,
} from './stores/redis/client.ts';
// The Lua scripts and the function library, for the bench's measure of what each costs Redis.
export {
  type LuaScript,
  library,
  type ScriptName,
  scripts,
} from './stores/redis/scripts.generated.ts';
