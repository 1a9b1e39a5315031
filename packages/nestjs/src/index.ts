// @sentinel/nestjs: a module, a guard and decorators that map a Nest call to core's HTTP limiter, and a storage for @nestjs/throttler.
export * from '@sentinel/core/adapter';
export { RateLimit, RateLimitDecision, SkipRateLimit } from './decorators.ts';
export {
  RATE_LIMIT_METADATA,
  type RouteRateLimitOptions,
  SENTINEL_OPTIONS,
  type SentinelModuleOptions,
  type SentinelRequest,
  SKIP_RATE_LIMIT_METADATA,
} from './options.ts';
export { RateLimitException } from './rate-limit-exception.ts';
export { SentinelGuard } from './sentinel-guard.ts';
export { SentinelModule, type SentinelModuleAsyncOptions } from './sentinel-module.ts';
export { SentinelService } from './sentinel-service.ts';
export { SlotInterceptor } from './slots.ts';
export {
  SentinelThrottlerStorage,
  type SentinelThrottlerStorageOptions,
} from './throttler-storage.ts';
