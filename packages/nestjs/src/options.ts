// The module's options and the metadata keys its decorators write, shared by the module, the guard and the decorators.
import type { HttpLimiterOptions } from '@sentinel/core';
import { adapterOptions, fail } from '@sentinel/core/internal';

/**
 * What `identify`, `skip`, `cost` and the other options' functions get: Express's `req` on
 * `@nestjs/platform-express`, Fastify's `request` on `@nestjs/platform-fastify`, the HTTP request
 * behind a GraphQL operation, or a WebSocket client's handshake (its headers and address). What
 * guards before this one set on it, such as `req.user`, is there.
 */
export interface SentinelRequest {
  headers: Record<string, string | string[] | undefined>;
  /** The client address, as the platform resolved it under its trust-proxy setting. */
  ip?: string;
  // biome-ignore lint/suspicious/noExplicitAny: what auth guards add (req.user) is the app's type.
  [property: string]: any;
}

/**
 * `SentinelModule.forRoot()`'s options: those of every Sentinel adapter, for every route the
 * guard limits.
 */
export type SentinelModuleOptions = HttpLimiterOptions<SentinelRequest>;

/** A route's options, layered over the module's as `route()` layers them in the other adapters. */
export type RouteRateLimitOptions = Partial<SentinelModuleOptions>;

/** The injection token of the module's resolved options. */
export const SENTINEL_OPTIONS = Symbol.for('@sentinel/nestjs:options');

/** Metadata keys of `@RateLimit()` and `@SkipRateLimit()`, read through Nest's Reflector. */
export const RATE_LIMIT_METADATA = '@sentinel/nestjs:rate-limit';
export const SKIP_RATE_LIMIT_METADATA = '@sentinel/nestjs:skip';

/**
 * Names the other adapters take that this one answers another way: known, so that a misspelling
 * of one is named, and refused with what to do instead.
 */
const ANSWERED_ELSEWHERE = {
  handler:
    'is not an option of @sentinel/nestjs: a refusal is thrown as a RateLimitException, which an exception filter, @Catch(RateLimitException), answers your way',
} as const;

/** Module or route options, checked by name: a TypeError names a misspelt or misplaced one. */
export function checkedOptions<T extends object>(options: T | undefined, option: string): T {
  const given = adapterOptions(options, option, Object.keys(ANSWERED_ELSEWHERE));
  for (const [name, problem] of Object.entries(ANSWERED_ELSEWHERE)) {
    if ((given as Record<string, unknown>)[name] !== undefined) fail(name, problem);
  }
  return given;
}
