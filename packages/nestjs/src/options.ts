// The module's options and the metadata keys its decorators write, shared by the module, the guard and the decorators.
import type { HttpLimiterOptions } from '@sentinel/core';

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
