// @RateLimit() and @SkipRateLimit(): metadata on a controller, resolver, gateway or handler, which the guard reads.

import { createParamDecorator, type ExecutionContext, SetMetadata } from '@nestjs/common';
import type { Decision } from '@sentinel/core';
import { fail } from '@sentinel/core/internal';
import { exchangeOf } from './exchange.ts';
import {
  checkedOptions,
  RATE_LIMIT_METADATA,
  type RouteRateLimitOptions,
  SKIP_RATE_LIMIT_METADATA,
} from './options.ts';

/**
 * A route's own limits, layered over the module's options: a route naming its own policies
 * (`limit`, `policies`, `tiers`) or store replaces the module's, and any other option (`cost`,
 * `group`, `identify`, ...) replaces that one alone. On a class it applies to every handler; a
 * handler's own is layered over its class's.
 * @example @RateLimit({ group: 'search', cost: 5 })
 */
export function RateLimit(options: RouteRateLimitOptions): ClassDecorator & MethodDecorator {
  // Misspelt names fail here, as the app's modules are imported; values when the app starts.
  return SetMetadata(RATE_LIMIT_METADATA, checkedOptions(options, '@RateLimit() options'));
}

/**
 * Skips the guard for a class or a handler. `@SkipRateLimit(false)` on a handler limits it again
 * inside a skipped class.
 * @example @SkipRateLimit()
 */
export function SkipRateLimit(skip = true): ClassDecorator & MethodDecorator {
  if (typeof skip !== 'boolean')
    fail('@SkipRateLimit()', `takes true or false, got ${String(skip)}`);
  return SetMetadata(SKIP_RATE_LIMIT_METADATA, skip);
}

/**
 * The guard's decision for this request, as a handler parameter: what `req.rateLimit` holds,
 * in HTTP and GraphQL handlers alike; undefined where no limit decided (a skipped handler).
 * @example @Get() list(@RateLimitDecision() decision?: Decision) { ... }
 */
export const RateLimitDecision = createParamDecorator(
  (_data: unknown, context: ExecutionContext): Decision | undefined =>
    exchangeOf(context)?.request.rateLimit as Decision | undefined,
);
