// @sentinel/rls: Envoy's rate limit service on Sentinel's buckets.
export type {
  DescriptorEntry,
  MatchedLimit,
  RateLimitConfig,
  RateLimitRule,
  RequestDescriptor,
  Unit,
} from './types.ts';
export { UNIT_SECONDS } from './types.ts';
