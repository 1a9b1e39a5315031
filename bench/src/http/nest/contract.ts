// What the bench and the compiled Nest app share: the variants it serves, what the bench hands it, and what it hands back.

export type NestPlatform = 'express' | 'fastify';

/** The app's variants, named as the HTTP suite names them. */
export type NestVariant = 'bare' | 'floor' | 'sentinel-own-client' | '@nestjs/throttler';

/** A request as the floor reads it: Express's `req` or Fastify's `request`. */
export interface NestRequestLike {
  headers: Record<string, string | string[] | undefined>;
}

/** What the bench decides for every framework alike: the limit, the key, the floor and the failure count. */
export interface NestAppSettings {
  readonly redisUrl: string;
  /** Requests per window: so many that nothing is refused. */
  readonly limit: number;
  readonly windowMs: number;
  /** The header the load keys requests by; both limiters count by it, one hot key. */
  readonly apiKeyHeader: string;
  /** Sentinel's `onError`, which counts the failures the suite reports. */
  readonly onError: () => void;
  /** The one-call floor, for the `floor` variant: one EVALSHA per request. */
  readonly floor?: { call(req: NestRequestLike): Promise<unknown> };
}

export interface RunningNestApp {
  readonly port: number;
  close(): Promise<void>;
}

/** The compiled module, `dist/app.js`. */
export interface NestAppModule {
  serveNest(
    platform: NestPlatform,
    variant: NestVariant,
    settings: NestAppSettings,
  ): Promise<RunningNestApp>;
}
