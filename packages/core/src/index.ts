// @sentinel/core: atomic distributed rate limiting, against Redis or in memory.
// These exports are the public API. The scripts, the evaluator, the connection wrapper and the
// header serialisers stay internal; adapters build on @sentinel/core/internal.

export { ipIdentity, ipMatcher } from './http/client-ip.ts';
export {
  type ApiKeyIdentifier,
  type ApiKeyOptions,
  type ApiKeyTenant,
  byApiKey,
  byHeader,
  type HeaderOptions,
  type UnverifiedCredential,
} from './http/credentials.ts';
export type { FetchRequestLike, HeaderRecord } from './http/fetch-request.ts';
export {
  draft6Headers,
  draft7Headers,
  draft11Headers,
  HEADER_FORMATS,
  type HeaderFormat,
  legacyHeaders,
  rateLimitHeaders,
  retryAfterSeconds,
} from './http/headers.ts';
export {
  createHttpLimiter,
  type HttpLimiter,
  type HttpLimiterOptions,
  type Verdict,
} from './http/http-limiter.ts';
export {
  byIp,
  chain,
  type Identifier,
  type IdentifyResult,
  type Identity,
  type IpOptions,
  type RequestLike,
} from './http/identity.ts';
export {
  BANNED,
  COST_EXCEEDS_LIMIT,
  COST_EXCEEDS_LIMIT_STATUS,
  type ProblemDetails,
  QUOTA_EXCEEDED,
  SHED,
} from './http/problem.ts';
export type { ShedOptions } from './http/shed.ts';
export type { TrustProxy } from './http/trust-proxy.ts';
export type { RefusalReason } from './http/verdict.ts';
export type { BlockCacheOptions } from './limiter/block-cache.ts';
export type { CircuitBreakerOptions } from './limiter/circuit-breaker.ts';
export {
  createLimiter,
  type Limiter,
  type LimiterOptions,
  type RefundOptions,
} from './limiter/limiter.ts';
export type {
  BreakerEvent,
  DecisionEvent,
  LateRefundEvent,
  Logger,
  Observer,
  ReleaseEvent,
  StoreErrorEvent,
  StoreStateEvent,
} from './observe/observer.ts';
export type {
  MeterProviderLike,
  OpenTelemetryOptions,
  TracerProviderLike,
} from './observe/opentelemetry.ts';
export { type DescriptorEntryLike, descriptorKey } from './shared/descriptor-key.ts';
export { SentinelError, type SentinelErrorCode } from './shared/errors.ts';
export { fingerprint, storageIdentity } from './shared/fingerprint.ts';
export * from './shared/types.ts';
export { formatWindow, parseWindow } from './shared/window.ts';
export { MemoryStore, type MemoryStoreOptions } from './stores/memory/memory-store.ts';
export { createRedisClient, LIMITER_CLIENT_OPTIONS } from './stores/redis/client.ts';
export type {
  IoredisLikeClient,
  NodeRedisLikeClient,
  SupportedRedisClient,
} from './stores/redis/connection.ts';
export {
  type RedisClient,
  RedisStore,
  type RedisStoreOptions,
} from './stores/redis/redis-store.ts';
