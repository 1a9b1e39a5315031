// Sentinel's options in every app: a limit nothing reaches, a count of the failures it reports,
// and the set-up the variant names. A decision taken without Redis (past the deadline, or with
// the breaker open) answers early, which would flatter Sentinel's figures: the suite reports them.
import { Redis } from 'ioredis';
import { API_KEY_HEADER, HUGE_LIMIT, type SentinelVariant, WINDOW_MS } from './variants.ts';

let failures = 0;

/** Sentinel's `onError` in every app: counts the failure, for the suite to report. */
export function countFailure(): void {
  failures++;
}

/**
 * The `identify` users write when they trust the key a request names, synchronous. Node's
 * adapters give it Node's headers, Hono's a record read through to the fetch API's `Headers`.
 */
function identifyByKey(req: { headers: Readonly<Record<string, string | string[] | undefined>> }) {
  return { key: req.headers[API_KEY_HEADER] as string };
}

/** The variant's options, and what closes the client the app owns, if it made one. */
export function sentinelOptions(variant: SentinelVariant | 'sentinel-leases', redisUrl: string) {
  const common = {
    limit: HUGE_LIMIT,
    window: WINDOW_MS,
    onError: countFailure,
  };
  switch (variant) {
    case 'sentinel':
      return { options: { ...common, redisUrl }, close: async () => {} };
    case 'sentinel-by-key':
      return { options: { ...common, redisUrl, identify: identifyByKey }, close: async () => {} };
    case 'sentinel-own-client':
    case 'sentinel-leases': {
      // As a user writes it: ioredis's defaults, not the settings Sentinel gives its own client.
      const { hostname, port } = new URL(redisUrl);
      const redis = new Redis({ host: hostname, port: Number(port) });
      const leases = variant === 'sentinel-leases' && { quotaLeases: true };
      return {
        options: { ...common, redis, identify: identifyByKey, ...leases },
        close: async () => void (await redis.quit()),
      };
    }
  }
}

/**
 * Express's, Koa's or Hono's middleware for the variant, built by `rateLimit`, and what closes it and
 * then the client the app made, if any.
 */
export function sentinelMiddleware<M extends { close(): Promise<void> }>(
  variant: SentinelVariant | 'sentinel-leases',
  redisUrl: string,
  rateLimit: (options: ReturnType<typeof sentinelOptions>['options']) => M,
): { use: M; close: () => Promise<void> } {
  const { options, close } = sentinelOptions(variant, redisUrl);
  const limit = rateLimit(options);
  return { use: limit, close: () => limit.close().then(close) };
}

/** The failures Sentinel reported in this process so far. */
export function sentinelFailures(): number {
  return failures;
}

/**
 * The `RateLimit-Policy` and `RateLimit` headers Sentinel sends on an admitted request (draft 11),
 * as a bare app would set them by hand: the same names, the same shape, a count that changes.
 */
export function headersByHand(): () => [string, string][] {
  let left = HUGE_LIMIT;
  const policy = `"${HUGE_LIMIT}-per-1m";q=${HUGE_LIMIT};w=${WINDOW_MS / 1000}`;
  return () => [
    ['RateLimit-Policy', policy],
    ['RateLimit', `"${HUGE_LIMIT}-per-1m";r=${--left};t=60`],
  ];
}
