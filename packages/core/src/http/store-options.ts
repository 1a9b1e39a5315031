// The store part of the identity limiter's options, for the limiters this layer builds beside it.
import type { LimiterOptions } from '../limiter/limiter.ts';

/**
 * What a limiter of this layer's own (`ban`'s, `shed`'s) takes of the identity limiter's options:
 * its store and how it reaches it. Not its policies, prefix or failure mode.
 */
export function storeOptionsOf(options: Omit<LimiterOptions, 'onError'>): Partial<LimiterOptions> {
  const { store, redis, timeout, connectTimeout, breaker } = options;
  return {
    ...(store !== undefined && { store }),
    ...(redis !== undefined && { redis }),
    ...(timeout !== undefined && { timeout }),
    ...(connectTimeout !== undefined && { connectTimeout }),
    ...(breaker !== undefined && { breaker }),
  };
}
