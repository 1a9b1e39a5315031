// sentinel-rls's OpenTelemetry: one resource and one diagnostic logger for its traces
// (TRACING_*) and its metrics (OTEL_METRICS_EXPORTER). The service imports this module only when
// one of them is on, so that a service without them loads no SDK.
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { DiagLogLevel, diag } from '@opentelemetry/api';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import type { Logger } from './logger.ts';
import type { RlsMetrics } from './metrics.ts';
import { startMetricsExport } from './metrics-export.ts';
import type { Settings } from './settings.ts';
import { startTracing, type Tracing } from './tracing.ts';

/** How long a shutdown waits for the last spans and counts to be exported, as upstream's runner. */
const SHUTDOWN_TIMEOUT_MS = 5000;

export interface Telemetry {
  /** Undefined unless TRACING_ENABLED. */
  readonly tracing: Tracing | undefined;
  /** Exports the spans and counts still held, within 5 s, and stops. */
  shutdown(): Promise<void>;
}

/**
 * Starts what the settings turn on, each registered globally so that @sentinel/core's spans and
 * instruments, made through @opentelemetry/api, go out with the service's own.
 */
export async function startTelemetry(
  settings: Settings,
  metrics: RlsMetrics,
  log: Logger,
): Promise<Telemetry> {
  diag.setLogger(
    {
      error: (message) => log.warn(`OpenTelemetry: ${message}`),
      warn: (message) => log.warn(`OpenTelemetry: ${message}`),
      info: () => {},
      debug: () => {},
      verbose: () => {},
    },
    { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true },
  );
  const { tracing: named } = settings;
  const serviceInstanceId = named.serviceInstanceId ?? randomUUID();
  // OTEL_RESOURCE_ATTRIBUTES may add attributes; the service's own are TRACING_*'s, which name
  // the service for its metrics as well.
  const resource = detectResources({ detectors: [envDetector] }).merge(
    resourceFromAttributes({
      'service.name': named.serviceName,
      ...(named.serviceNamespace !== undefined && { 'service.namespace': named.serviceNamespace }),
      'service.instance.id': serviceInstanceId,
    }),
  );
  log.info(`OpenTelemetry: service ${named.serviceName}, instance ${serviceInstanceId}`);
  const version = packageVersion();
  const tracing = settings.tracing.enabled
    ? await startTracing(settings.tracing, resource, version, log)
    : undefined;
  const metricsExport = settings.metricsExport.enabled
    ? await startMetricsExport(settings.metricsExport, resource, metrics, version, log)
    : undefined;
  let stopping: Promise<void> | undefined;
  return {
    tracing,
    shutdown() {
      stopping ??= withTimeout(
        Promise.all([tracing?.shutdown(), metricsExport?.shutdown()]).then(() => {}),
        SHUTDOWN_TIMEOUT_MS,
      ).catch((error: unknown) =>
        log.warn(`OpenTelemetry: the last spans or counts were not exported: ${String(error)}`),
      );
      return stopping;
    },
  };
}

/** This package's version, for the tracer's and the meter's scope; '' in a bundle without it. */
function packageVersion(): string {
  try {
    // One directory up from src/ and from dist/ alike.
    const manifest = readFileSync(new URL('../package.json', import.meta.url), 'utf8');
    return (JSON.parse(manifest) as { version: string }).version;
  } catch {
    return '';
  }
}

function withTimeout(promise: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
