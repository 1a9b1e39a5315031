// The OpenTelemetry SDK as an app registers it, with its in-memory exporters, for suites that
// read what Sentinel's instruments and spans gave it.
import { type Attributes, context, type Span } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';

/** One data point of a metric as the exporter received it. */
export interface Point {
  readonly attributes: Attributes;
  /** A sum's value; a histogram's count of observations. */
  readonly value: number;
}

export interface ExportedMetric {
  readonly name: string;
  readonly unit: string;
  readonly description: string;
  readonly points: readonly Point[];
}

export interface MetricsSdk {
  readonly meterProvider: MeterProvider;
  /** Every metric the meter provider holds now, as the exporter receives it, by name. */
  read(): Promise<Map<string, ExportedMetric>>;
  shutdown(): Promise<void>;
}

/** A MeterProvider whose reader exports only when read, cumulatively, into memory. */
export function metricsSdk(): MetricsSdk {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  // Exports on read only: an hour between the periodic ones.
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });
  return {
    meterProvider,
    async read() {
      exporter.reset();
      await reader.forceFlush();
      const metrics = new Map<string, ExportedMetric>();
      for (const resource of exporter.getMetrics()) {
        for (const scope of resource.scopeMetrics) {
          for (const metric of scope.metrics) {
            const { name, unit, description } = metric.descriptor;
            const points = metric.dataPoints.map((point) => ({
              attributes: point.attributes,
              value:
                typeof point.value === 'number'
                  ? point.value
                  : (point.value as { count: number }).count,
            }));
            metrics.set(name, { name, unit, description, points });
          }
        }
      }
      return metrics;
    },
    shutdown: () => meterProvider.shutdown(),
  };
}

export interface TracingSdk {
  readonly tracerProvider: BasicTracerProvider;
  /** Every span ended so far. */
  spans(): ReadableSpan[];
  /** Runs `work` inside a new active span, ended after it: as an HTTP server span would be. */
  inSpan<T>(name: string, work: (span: Span) => Promise<T>): Promise<T>;
  shutdown(): Promise<void>;
}

let contextManager: AsyncLocalStorageContextManager | undefined;

/** The context manager an SDK registers, which carries the active span across awaits. */
export function enableContext(): void {
  if (contextManager) return;
  contextManager = new AsyncLocalStorageContextManager();
  contextManager.enable();
  context.setGlobalContextManager(contextManager);
}

/** A TracerProvider that keeps every ended span in memory, every span sampled. */
export function tracingSdk(): TracingSdk {
  enableContext();
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
  const tracer = tracerProvider.getTracer('test');
  return {
    tracerProvider,
    spans: () => exporter.getFinishedSpans(),
    inSpan: (name, work) =>
      tracer.startActiveSpan(name, async (span) => {
        try {
          return await work(span);
        } finally {
          span.end();
        }
      }),
    shutdown: () => tracerProvider.shutdown(),
  };
}

/** The data points of `name`, or none. */
export function pointsOf(metrics: Map<string, ExportedMetric>, name: string): readonly Point[] {
  return metrics.get(name)?.points ?? [];
}

/** The value of the point of `name` whose attributes are exactly `attributes`; 0 if none. */
export function pointValue(
  metrics: Map<string, ExportedMetric>,
  name: string,
  attributes: Attributes,
): number {
  const wanted = JSON.stringify(sorted(attributes));
  const point = pointsOf(metrics, name).find(
    (p) => JSON.stringify(sorted(p.attributes)) === wanted,
  );
  return point?.value ?? 0;
}

/** The `sentinel.decisions` count of `result` under the rest of `attributes`; 0 if none. */
export function decisionCount(
  metrics: Map<string, ExportedMetric>,
  result: string,
  attributes: Attributes,
): number {
  return pointValue(metrics, 'sentinel.decisions', { 'sentinel.result': result, ...attributes });
}

function sorted(attributes: Attributes): Attributes {
  return Object.fromEntries(Object.entries(attributes).sort(([a], [b]) => a.localeCompare(b)));
}
