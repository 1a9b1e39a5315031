// Traces over OTLP, as envoyproxy/ratelimit exports them with TRACING_ENABLED: its resource, its
// parent-based ratio sampler, its propagators and its spans. The service imports this module only
// when tracing is on, so that a service without it loads no SDK.
import { randomUUID } from 'node:crypto';
import { DiagLogLevel, diag, type Tracer } from '@opentelemetry/api';
import {
  CompositePropagator,
  W3CBaggagePropagator,
  W3CTraceContextPropagator,
} from '@opentelemetry/core';
import { B3Propagator } from '@opentelemetry/propagator-b3';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import {
  BatchSpanProcessor,
  ParentBasedSampler,
  type SpanExporter,
  TraceIdRatioBasedSampler,
} from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import type { TraceCall } from './grpc/grpc-server.ts';
import type { RateLimitRequestMessage } from './grpc/messages.ts';
import { serverSpan } from './grpc/server-span.ts';
import type { Logger } from './logger.ts';
import type { TracingProtocol, TracingSettings } from './settings.ts';

/** The span upstream's service opens in ShouldRateLimit, for gRPC and /json calls alike. */
export const EXECUTION_SPAN_NAME = 'ShouldRateLimit Execution';
/** How long a shutdown waits for the last spans to be exported, as upstream's runner waits. */
const SHUTDOWN_TIMEOUT_MS = 5000;

export interface Tracing {
  /** The gRPC server span of each ShouldRateLimit. */
  readonly traceCall: TraceCall;
  /** Runs one decision in the execution span, active so that the store's spans are its children. */
  execution<T>(request: RateLimitRequestMessage, decide: () => Promise<T>): Promise<T>;
  /** Exports the spans still held, within 5 s, and stops. */
  shutdown(): Promise<void>;
}

/**
 * Starts the SDK and registers it globally: @sentinel/core's spans, made through
 * @opentelemetry/api, join the traces of the service's own. The exporter reads
 * OTEL_EXPORTER_OTLP_* from process.env, as the OpenTelemetry SDK does everywhere.
 */
export async function startTracing(settings: TracingSettings, log: Logger): Promise<Tracing> {
  diag.setLogger(
    {
      error: (message) => log.warn(`tracing: ${message}`),
      warn: (message) => log.warn(`tracing: ${message}`),
      info: () => {},
      debug: () => {},
      verbose: () => {},
    },
    { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true },
  );
  const serviceInstanceId = settings.serviceInstanceId ?? randomUUID();
  const provider = new NodeTracerProvider({
    // OTEL_RESOURCE_ATTRIBUTES may add attributes; the service's own are TRACING_*'s.
    resource: detectResources({ detectors: [envDetector] }).merge(
      resourceFromAttributes({
        'service.name': settings.serviceName,
        ...(settings.serviceNamespace !== undefined && {
          'service.namespace': settings.serviceNamespace,
        }),
        'service.instance.id': serviceInstanceId,
      }),
    ),
    // A caller's decision stands; a trace that starts here is kept at the rate.
    sampler: new ParentBasedSampler({
      root: new TraceIdRatioBasedSampler(settings.samplingRate),
    }),
    spanProcessors: [new BatchSpanProcessor(await otlpExporter(settings.protocol))],
  });
  provider.register({
    propagator: new CompositePropagator({
      propagators: [
        new W3CTraceContextPropagator(),
        new B3Propagator(),
        new W3CBaggagePropagator(),
      ],
    }),
  });
  log.info(
    `tracing to OTLP over ${settings.protocol}: service ${settings.serviceName}, instance ${serviceInstanceId}, sampling rate ${settings.samplingRate}`,
  );
  const tracer = provider.getTracer('@sentinel/rls');
  let stopping: Promise<void> | undefined;
  return {
    traceCall: serverSpan(tracer),
    execution: (request, decide) => inExecutionSpan(tracer, request, decide),
    shutdown() {
      stopping ??= withTimeout(provider.shutdown(), SHUTDOWN_TIMEOUT_MS).catch((error: unknown) =>
        log.warn(`tracing: the last spans were not exported: ${String(error)}`),
      );
      return stopping;
    },
  };
}

/** Each protocol's exporter, loaded alone: the gRPC one brings its own gRPC client. */
async function otlpExporter(protocol: TracingProtocol): Promise<SpanExporter> {
  if (protocol === 'grpc') {
    const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-grpc');
    return new OTLPTraceExporter();
  }
  // Protobuf bodies, as upstream's otlptracehttp sends them.
  const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-proto');
  return new OTLPTraceExporter();
}

function inExecutionSpan<T>(
  tracer: Tracer,
  request: RateLimitRequestMessage,
  decide: () => Promise<T>,
): Promise<T> {
  return tracer.startActiveSpan(EXECUTION_SPAN_NAME, async (span) => {
    if (span.isRecording()) {
      // Upstream's attribute names; the request in JSON where it writes Go's text form.
      span.setAttributes({ domain: request.domain, 'request string': JSON.stringify(request) });
    }
    try {
      return await decide();
    } finally {
      span.end();
    }
  });
}

function withTimeout(promise: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
