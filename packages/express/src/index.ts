// @sentinel/express: Express 4 and 5 middleware for Sentinel's distributed rate limiting.
export * from '@sentinel/core/adapter';
export {
  type RateLimitHandler,
  type RateLimitMiddleware,
  type RateLimitOptions,
  type RouteRateLimitOptions,
  rateLimit,
} from './rate-limit.ts';
