// sentinel-rls's statistics over OTLP, beside /metrics and counted once for both. Each keeps
// upstream's statsd name with its variable parts (domain, descriptor keys, gRPC method, error)
// moved into the attributes upstream's Prometheus mapping gives them as labels.
import { type Meter, metrics as metricsApi } from '@opentelemetry/api';
import type { Resource } from '@opentelemetry/resources';
import {
  MeterProvider,
  PeriodicExportingMetricReader,
  type PushMetricExporter,
} from '@opentelemetry/sdk-metrics';
import type { Logger } from './logger.ts';
import { type RlsMetrics, STAT_HELP, STATS, TIME_BUCKETS } from './metrics.ts';
import type { MetricsExportSettings, MetricsProtocol } from './settings.ts';

export interface MetricsExport {
  /** Exports the counts a last time, and stops. */
  shutdown(): Promise<void>;
}

/**
 * Starts a meter provider that exports every `intervalMs`, and registers it globally so that
 * @sentinel/core's `sentinel.*` instruments are exported with these.
 */
export async function startMetricsExport(
  settings: MetricsExportSettings,
  resource: Resource,
  metrics: RlsMetrics,
  version: string,
  log: Logger,
): Promise<MetricsExport> {
  const provider = new MeterProvider({
    resource,
    readers: [
      new PeriodicExportingMetricReader({
        exporter: await otlpExporter(settings.protocol),
        exportIntervalMillis: settings.intervalMs,
        exportTimeoutMillis: settings.timeoutMs,
      }),
    ],
  });
  metricsApi.setGlobalMeterProvider(provider);
  observe(provider.getMeter('@sentinel/rls', version), metrics);
  log.info(`exporting metrics to OTLP over ${settings.protocol} every ${settings.intervalMs} ms`);
  return { shutdown: () => provider.shutdown() };
}

/** Each protocol's exporter, loaded alone: the gRPC one brings its own gRPC client. */
async function otlpExporter(protocol: MetricsProtocol): Promise<PushMetricExporter> {
  if (protocol === 'grpc') {
    const { OTLPMetricExporter } = await import('@opentelemetry/exporter-metrics-otlp-grpc');
    return new OTLPMetricExporter();
  }
  const { OTLPMetricExporter } = await import('@opentelemetry/exporter-metrics-otlp-proto');
  return new OTLPMetricExporter();
}

/**
 * The instruments. The counters are asynchronous and read the counts /metrics renders, so a
 * decision costs nothing more with export on; the response time histogram, which has no
 * asynchronous form, is recorded with each request.
 */
function observe(meter: Meter, metrics: RlsMetrics): void {
  const perLimit = STATS.map((stat) =>
    meter.createObservableCounter(`ratelimit.service.rate_limit.${stat}`, {
      description: STAT_HELP[stat],
      unit: '{hit}',
    }),
  );
  const errors = meter.createObservableCounter('ratelimit.service.call.should_rate_limit', {
    description: 'Requests that failed, by err_type.',
    unit: '{request}',
  });
  const shadowMode = meter.createObservableCounter('ratelimit.service.global_shadow_mode', {
    description: 'Requests SHADOW_MODE answered OK.',
    unit: '{request}',
  });
  const requests = meter.createObservableCounter('ratelimit_server.total_requests', {
    description: 'Requests served, by grpc_method.',
    unit: '{request}',
  });
  const storeErrors = meter.createObservableCounter('sentinel.rls.store.errors', {
    description: 'Requests answered by FAILURE_MODE because the store failed.',
    unit: '{request}',
  });
  meter.addBatchObservableCallback(
    (result) => {
      const counts = metrics.counts();
      for (const series of counts.series) {
        STATS.forEach((stat, i) => {
          result.observe(
            perLimit[i] as (typeof perLimit)[number],
            series.counts[stat],
            series.attributes,
          );
        });
      }
      result.observe(errors, counts.serviceErrors, { err_type: 'service_error' });
      result.observe(shadowMode, counts.globalShadowMode);
      for (const [method, count] of counts.requests) {
        result.observe(requests, count, { grpc_method: method });
      }
      result.observe(storeErrors, counts.storeErrors);
    },
    [...perLimit, errors, shadowMode, requests, storeErrors],
  );
  const responseTime = meter.createHistogram('ratelimit_server.response_time', {
    description: 'Time to answer a request, by grpc_method.',
    unit: 's',
    advice: { explicitBucketBoundaries: [...TIME_BUCKETS] },
  });
  metrics.onRequest((method, seconds) => responseTime.record(seconds, { grpc_method: method }));
}
