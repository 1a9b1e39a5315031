// @sentinel/rls: Envoy's rate limit service on Sentinel's buckets.
export {
  HEADER_STYLES,
  type HeaderStatus,
  type HeaderStyle,
  LEGACY_HEADER_NAMES,
  type LegacyHeaderNames,
  responseHeaders,
} from './headers.ts';
export type {
  DescriptorEntry,
  MatchedLimit,
  RateLimitConfig,
  RateLimitRule,
  RequestDescriptor,
  Unit,
} from './types.ts';
export { UNIT_SECONDS } from './types.ts';
