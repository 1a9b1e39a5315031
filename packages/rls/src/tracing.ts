// Traces over OTLP, as envoyproxy/ratelimit exports them with TRACING_ENABLED: its parent-based
// ratio sampler, its propagators and its spans. Loaded only through telemetry.ts.
import type { Tracer } from '@opentelemetry/api';
import {
  CompositePropagator,
  W3CBaggagePropagator,
  W3CTraceContextPropagator,
} from '@opentelemetry/core';
import { B3Propagator } from '@opentelemetry/propagator-b3';
import type { Resource } from '@opentelemetry/resources';
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

export interface Tracing {
  /** The gRPC server span of each ShouldRateLimit. */
  readonly traceCall: TraceCall;
  /** Runs one decision in the execution span, active so that the store's spans are its children. */
  execution<T>(request: RateLimitRequestMessage, decide: () => Promise<T>): Promise<T>;
  /** Exports the spans still held, and stops. */
  shutdown(): Promise<void>;
}

/**
 * Starts the tracer provider and registers it globally: @sentinel/core's spans, made through
 * @opentelemetry/api, join the traces of the service's own. The exporter reads
 * OTEL_EXPORTER_OTLP_* from process.env, as the OpenTelemetry SDK does everywhere.
 */
export async function startTracing(
  settings: TracingSettings,
  resource: Resource,
  version: string,
  log: Logger,
): Promise<Tracing> {
  const provider = new NodeTracerProvider({
    resource,
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
  log.info(`tracing to OTLP over ${settings.protocol}: sampling rate ${settings.samplingRate}`);
  const tracer = provider.getTracer('@sentinel/rls', version);
  return {
    traceCall: serverSpan(tracer),
    execution: (request, decide) => inExecutionSpan(tracer, request, decide),
    shutdown: () => provider.shutdown(),
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
