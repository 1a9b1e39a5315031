// The service: the configuration, the limiter over Redis or memory, and the gRPC and HTTP
// listeners that ask it, started together and stopped together.
import { status } from '@grpc/grpc-js';
import {
  createLimiter,
  createRedisClient,
  type IoredisLikeClient,
  type Limiter,
} from '@sentinel/core';
import { createRedisSentinelClient } from '@sentinel/core/internal';
import type { ConfigError } from './config/config-error.ts';
import { configSource, readConfig, watchConfig } from './config/runtime-files.ts';
import { Decider, type Verdict } from './decide.ts';
import { startGrpcServer } from './grpc/grpc-server.ts';
import type {
  DescriptorStatusMessage,
  RateLimitRequestMessage,
  RateLimitResponseMessage,
} from './grpc/messages.ts';
import { httpStatusOf, requestFromJson, responseToJson } from './grpc/proto-json.ts';
import { type HeaderStatus, responseHeaders } from './headers.ts';
import { startHttpServer } from './http/http-server.ts';
import { type Logger, logger } from './logger.ts';
import { RlsMetrics } from './metrics.ts';
import { ignoredVariables, type RedisSettings, type Settings } from './settings.ts';
import type { Telemetry } from './telemetry.ts';
import type { RateLimitConfig, RequestDescriptor } from './types.ts';
import { UNIT_SECONDS } from './types.ts';

export interface RateLimitService {
  readonly grpcPort: number;
  readonly httpPort: number;
  /** Stops answering (health says NOT_SERVING first), then closes the listeners and Redis. */
  close(): Promise<void>;
}

/** Thrown to gRPC callers as UNAVAILABLE under `FAILURE_MODE=error` while the store fails. */
export class StoreUnavailableError extends Error {
  override readonly name = 'StoreUnavailableError';
  readonly grpcStatus = status.UNAVAILABLE;
}

export async function startRateLimitService(
  settings: Settings,
  log: Logger = logger(settings.logLevel),
): Promise<RateLimitService> {
  const ignored = ignoredVariables(settings.env);
  if (ignored.length > 0) {
    log.warn(`these variables of envoyproxy/ratelimit have no effect here: ${ignored.join(', ')}`);
  }
  const source = configSource(settings.env, settings.configFiles);
  let config: RateLimitConfig = await readConfig(source, {
    mergeDomains: settings.mergeDomainConfig,
  });
  log.info(`loaded the configuration of ${config.domains.length} domains`);
  const watcher = watchConfig(
    source,
    { mergeDomains: settings.mergeDomainConfig },
    (next) => {
      config = next;
      log.info(`reloaded the configuration: ${next.domains.length} domains`);
    },
    (error: ConfigError) => log.error(`kept the last good configuration: ${error.message}`),
  );

  const { redis } = settings;
  const client = redis === undefined ? undefined : redisClient(redis);
  if (client === undefined) {
    log.warn('REDIS_URL is not set: limits are counted in this process only, on the memory store');
  }
  const metrics = new RlsMetrics({ nearLimitRatio: settings.nearLimitRatio });
  // Imported only when on: the SDK and its exporters stay unloaded otherwise.
  const telemetry: Telemetry | undefined =
    settings.tracing.enabled || settings.metricsExport.enabled
      ? await (await import('./telemetry.ts')).startTelemetry(settings, metrics, log)
      : undefined;
  const tracing = telemetry?.tracing;
  const limiter: Limiter = createLimiter({
    ...(client !== undefined && { redis: client }),
    ...(client !== undefined && { timeout: settings.redisTimeoutMs }),
    prefix: settings.prefix,
    // Every call brings its own policies; this one is never counted.
    limit: 1,
    window: '1s',
    onStoreError: settings.failureMode === 'closed' ? 'deny' : 'allow',
    onError: (error) => log.warn(`store: ${error.message}`),
    // Each decision goes on the execution span, each Redis call beneath it, and the limiter's
    // sentinel.* instruments are exported with the service's.
    ...(telemetry !== undefined && { openTelemetry: true }),
  });
  const decider = new Decider({
    limiter,
    config: () => config,
    shadowMode: settings.shadowMode,
    separately: redis?.type === 'cluster',
  });

  async function decide(request: RateLimitRequestMessage): Promise<RateLimitResponseMessage> {
    const descriptors: RequestDescriptor[] = request.descriptors.map((d) => ({
      entries: d.entries,
      limit:
        d.limit === undefined || d.limit.unit === 'unknown'
          ? undefined
          : { requestsPerUnit: d.limit.requestsPerUnit, unit: d.limit.unit },
    }));
    const requestHits = request.hitsAddend > 0 ? request.hitsAddend : 1;
    // A negative hit gives back to the budget, which a joint decision does not do: it looks.
    const hits = request.descriptors.map((d) =>
      d.isNegativeHits ? 0 : (d.hitsAddend ?? requestHits),
    );
    const verdict = await decider.decide(request.domain, descriptors, hits);
    if (verdict.degraded) {
      metrics.storeError();
      if (settings.failureMode === 'error') {
        throw new StoreUnavailableError('the rate limit store is unavailable');
      }
    }
    verdict.statuses.forEach((status, i) => {
      if (verdict.degraded || status.statKey === undefined || status.limit === undefined) return;
      const hit = hits[i] ?? 1;
      // An enforced limit that admitted in a refused request only looked: its statistics count
      // the hits as if taken, as the reference service's, which increments every descriptor.
      const looked = !status.shadow && !status.overLimit && verdict.overall === 'OVER_LIMIT';
      metrics.record(status.statKey, {
        hits: hit,
        limit: status.limit.requestsPerUnit,
        remaining: looked ? Math.max(0, status.remaining - hit) : status.remaining,
        overLimit: status.overLimit,
        shadowMode: status.shadow,
      });
    });
    if (settings.shadowMode && verdict.statuses.some((s) => s.code === 'OVER_LIMIT')) {
      metrics.globalShadowMode();
    }
    return toResponse(verdict, settings);
  }

  /** A call of either listener, timed, with what it threw counted. */
  async function timed(
    method: 'ShouldRateLimit' | 'json',
    request: RateLimitRequestMessage,
  ): Promise<RateLimitResponseMessage> {
    const started = performance.now();
    try {
      return await (tracing === undefined
        ? decide(request)
        : tracing.execution(request, () => decide(request)));
    } catch (error) {
      if (!(error instanceof StoreUnavailableError)) metrics.serviceError();
      throw error;
    } finally {
      metrics.request(method, (performance.now() - started) / 1000);
    }
  }

  const grpc = await startGrpcServer({
    host: settings.grpcHost,
    port: settings.grpcPort,
    decide: (request) => timed('ShouldRateLimit', request),
    traceCall: tracing?.traceCall,
  });
  let serving = true;
  const http = await startHttpServer({
    host: settings.host,
    port: settings.port,
    health: () => serving,
    metrics: () => metrics.render(),
    decideJson: async (body) => {
      let request: RateLimitRequestMessage;
      try {
        request = requestFromJson(body);
      } catch (error) {
        return { status: 400, body: { message: (error as Error).message } };
      }
      try {
        const response = await timed('json', request);
        return { status: httpStatusOf(response), body: responseToJson(response) };
      } catch (error) {
        // A store the failure mode says to report is unavailable, not a bad request; the rest
        // are answered as the reference service answers its service errors on /json.
        const status = error instanceof StoreUnavailableError ? 503 : 400;
        return { status, body: { message: (error as Error).message } };
      }
    },
  });
  log.info(
    `serving gRPC on ${settings.grpcHost}:${grpc.port} and HTTP on ${settings.host}:${http.port}`,
  );

  return {
    grpcPort: grpc.port,
    httpPort: http.port,
    async close() {
      serving = false;
      grpc.setServing(false);
      watcher.close();
      try {
        await Promise.all([grpc.close(), http.close()]);
        await limiter.close();
        await client?.quit();
      } finally {
        // Last, and even when Redis fails to quit: the spans and counts of the last calls are
        // exported.
        await telemetry?.shutdown();
      }
    },
  };
}

/** The client REDIS_TYPE asks for, with the limiter's connection settings. */
function redisClient(redis: RedisSettings): IoredisLikeClient {
  // Asked at every reconnect where the master is, the sentinels lead it to a promoted replica.
  if (redis.type === 'sentinel') return createRedisSentinelClient(redis);
  // One seed still makes a Cluster client when REDIS_TYPE says cluster.
  return createRedisClient(
    redis.type === 'cluster' && redis.urls.length === 1
      ? [redis.urls[0] as string, redis.urls[0] as string]
      : redis.urls,
  );
}

/** The response for a verdict: statuses in request order, and headers when enabled. */
function toResponse(verdict: Verdict, settings: Settings): RateLimitResponseMessage {
  const statuses = verdict.statuses.map(
    (status): DescriptorStatusMessage => ({
      code: status.code,
      ...(status.limit !== undefined && {
        currentLimit: {
          name: status.limit.name ?? '',
          requestsPerUnit: status.limit.requestsPerUnit,
          unit: status.limit.unit,
        },
        durationUntilResetMs: status.resetMs,
      }),
      limitRemaining: status.remaining,
    }),
  );
  // Under the failure mode nothing is known of the limits: no headers rather than made-up ones.
  if (!settings.limitResponseHeadersEnabled || verdict.degraded) {
    return { overallCode: verdict.overall, statuses };
  }
  const limited: HeaderStatus[] = [];
  for (const status of verdict.statuses) {
    if (status.limit === undefined) continue;
    limited.push({
      policy: status.limit.name ?? (status.statKey as string),
      limit: status.limit.requestsPerUnit,
      remaining: status.remaining,
      windowSeconds: UNIT_SECONDS[status.limit.unit] * status.limit.unitMultiplier,
      resetMs: status.resetMs,
      overLimit: status.code === 'OVER_LIMIT',
    });
  }
  const headers = responseHeaders(limited, settings.responseHeaders, settings.legacyHeaderNames);
  return {
    overallCode: verdict.overall,
    statuses,
    responseHeadersToAdd: Object.entries(headers).map(([key, value]) => ({ key, value })),
  };
}
