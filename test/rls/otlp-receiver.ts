// A local OTLP receiver, as a collector is one: OTLP/HTTP (protobuf on POST /v1/traces and
// /v1/metrics) or OTLP/gRPC (TraceService/Export and MetricsService/Export), each decoding what
// it gets into spans or metrics with their resource. Its messages are protobufjs types whose
// field numbers are copied from opentelemetry-proto, so the exporters' encoding is checked
// against the specification, not against itself.
import { createServer as createHttpServer } from 'node:http';
import { createRequire } from 'node:module';
import { createServer as createNetServer } from 'node:net';
import * as grpc from '@grpc/grpc-js';

/** The little of protobufjs used here. */
interface ProtoType {
  encode(message: unknown): { finish(): Uint8Array };
  decode(bytes: Uint8Array): unknown;
  toObject(message: unknown, options: object): Record<string, unknown>;
  fromObject(object: object): unknown;
}

const protobuf = createRequire(createRequire(import.meta.url).resolve('@grpc/proto-loader'))(
  'protobufjs',
) as { Root: { fromJSON(json: object): { lookupType(name: string): ProtoType } } };

const field = (type: string, id: number) => ({ type, id });
const repeated = (type: string, id: number) => ({ rule: 'repeated', type, id });

/**
 * opentelemetry-proto's collector/trace/v1, trace/v1, collector/metrics/v1, metrics/v1 (without
 * exemplars, exponential histograms and summaries), resource/v1 and common/v1, flattened.
 */
const root = protobuf.Root.fromJSON({
  nested: {
    ExportMetricsServiceRequest: {
      fields: { resource_metrics: repeated('ResourceMetrics', 1) },
    },
    ExportMetricsServiceResponse: { fields: {} },
    ResourceMetrics: {
      fields: {
        resource: field('Resource', 1),
        scope_metrics: repeated('ScopeMetrics', 2),
        schema_url: field('string', 3),
      },
    },
    ScopeMetrics: {
      fields: {
        scope: field('InstrumentationScope', 1),
        metrics: repeated('Metric', 2),
        schema_url: field('string', 3),
      },
    },
    Metric: {
      oneofs: { data: { oneof: ['gauge', 'sum', 'histogram'] } },
      fields: {
        name: field('string', 1),
        description: field('string', 2),
        unit: field('string', 3),
        gauge: field('Gauge', 5),
        sum: field('Sum', 7),
        histogram: field('Histogram', 9),
      },
    },
    Gauge: { fields: { data_points: repeated('NumberDataPoint', 1) } },
    Sum: {
      fields: {
        data_points: repeated('NumberDataPoint', 1),
        aggregation_temporality: field('AggregationTemporality', 2),
        is_monotonic: field('bool', 3),
      },
    },
    Histogram: {
      fields: {
        data_points: repeated('HistogramDataPoint', 1),
        aggregation_temporality: field('AggregationTemporality', 2),
      },
    },
    AggregationTemporality: {
      values: {
        AGGREGATION_TEMPORALITY_UNSPECIFIED: 0,
        AGGREGATION_TEMPORALITY_DELTA: 1,
        AGGREGATION_TEMPORALITY_CUMULATIVE: 2,
      },
    },
    NumberDataPoint: {
      oneofs: { value: { oneof: ['as_double', 'as_int'] } },
      fields: {
        attributes: repeated('KeyValue', 7),
        start_time_unix_nano: field('fixed64', 2),
        time_unix_nano: field('fixed64', 3),
        as_double: field('double', 4),
        as_int: field('sfixed64', 6),
      },
    },
    HistogramDataPoint: {
      fields: {
        attributes: repeated('KeyValue', 9),
        start_time_unix_nano: field('fixed64', 2),
        time_unix_nano: field('fixed64', 3),
        count: field('fixed64', 4),
        sum: field('double', 5),
        bucket_counts: repeated('fixed64', 6),
        explicit_bounds: repeated('double', 7),
      },
    },
    ExportTraceServiceRequest: { fields: { resource_spans: repeated('ResourceSpans', 1) } },
    ExportTraceServiceResponse: { fields: {} },
    ResourceSpans: {
      fields: {
        resource: field('Resource', 1),
        scope_spans: repeated('ScopeSpans', 2),
        schema_url: field('string', 3),
      },
    },
    Resource: { fields: { attributes: repeated('KeyValue', 1) } },
    ScopeSpans: {
      fields: {
        scope: field('InstrumentationScope', 1),
        spans: repeated('Span', 2),
        schema_url: field('string', 3),
      },
    },
    InstrumentationScope: { fields: { name: field('string', 1), version: field('string', 2) } },
    Span: {
      fields: {
        trace_id: field('bytes', 1),
        span_id: field('bytes', 2),
        trace_state: field('string', 3),
        parent_span_id: field('bytes', 4),
        flags: field('fixed32', 16),
        name: field('string', 5),
        kind: field('SpanKind', 6),
        start_time_unix_nano: field('fixed64', 7),
        end_time_unix_nano: field('fixed64', 8),
        attributes: repeated('KeyValue', 9),
        events: repeated('Event', 11),
        status: field('Status', 15),
      },
    },
    SpanKind: {
      values: {
        SPAN_KIND_UNSPECIFIED: 0,
        SPAN_KIND_INTERNAL: 1,
        SPAN_KIND_SERVER: 2,
        SPAN_KIND_CLIENT: 3,
        SPAN_KIND_PRODUCER: 4,
        SPAN_KIND_CONSUMER: 5,
      },
    },
    Event: {
      fields: {
        time_unix_nano: field('fixed64', 1),
        name: field('string', 2),
        attributes: repeated('KeyValue', 3),
      },
    },
    Status: { fields: { message: field('string', 2), code: field('StatusCode', 3) } },
    StatusCode: { values: { STATUS_CODE_UNSET: 0, STATUS_CODE_OK: 1, STATUS_CODE_ERROR: 2 } },
    KeyValue: { fields: { key: field('string', 1), value: field('AnyValue', 2) } },
    AnyValue: {
      oneofs: {
        value: {
          oneof: ['string_value', 'bool_value', 'int_value', 'double_value', 'array_value'],
        },
      },
      fields: {
        string_value: field('string', 1),
        bool_value: field('bool', 2),
        int_value: field('int64', 3),
        double_value: field('double', 4),
        array_value: field('ArrayValue', 5),
      },
    },
    ArrayValue: { fields: { values: repeated('AnyValue', 1) } },
  },
});

const exportRequest = root.lookupType('ExportTraceServiceRequest');
const exportResponse = root.lookupType('ExportTraceServiceResponse');
const exportMetricsRequest = root.lookupType('ExportMetricsServiceRequest');
const exportMetricsResponse = root.lookupType('ExportMetricsServiceResponse');

type Value = string | number | boolean | Value[];

/** One span as received, ids in hex and attributes as plain values. */
export interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  /** '' for a root span. */
  readonly parentSpanId: string;
  readonly name: string;
  /** SPAN_KIND_SERVER and its kin, as opentelemetry-proto names them. */
  readonly kind: string;
  readonly attributes: Readonly<Record<string, Value>>;
  readonly status: { readonly code: string; readonly message: string };
  /** The instrumentation scope's name. */
  readonly scope: string;
  readonly resource: Readonly<Record<string, Value>>;
}

/** One data point: a sum's or gauge's value, or a histogram's count, sum and buckets. */
export interface ReceivedPoint {
  readonly attributes: Readonly<Record<string, Value>>;
  readonly value?: number;
  readonly count?: number;
  readonly sum?: number;
  /** Per bucket, not cumulative, as OTLP sends them: one more than `bounds`. */
  readonly bucketCounts?: readonly number[];
  readonly bounds?: readonly number[];
}

/** One metric of one export, as received. */
export interface ReceivedMetric {
  readonly name: string;
  readonly description: string;
  readonly unit: string;
  readonly type: 'sum' | 'gauge' | 'histogram';
  /** AGGREGATION_TEMPORALITY_CUMULATIVE and its kin; '' for a gauge. */
  readonly temporality: string;
  /** A sum's is_monotonic; false for the rest. */
  readonly monotonic: boolean;
  readonly points: readonly ReceivedPoint[];
  readonly scope: string;
  readonly scopeVersion: string;
  readonly resource: Readonly<Record<string, Value>>;
}

/** One export call: where it went and what it carried besides the spans. */
export interface ReceivedExport {
  /** The HTTP path, or the gRPC method's path. */
  readonly path: string;
  /** HTTP headers, or gRPC metadata, lower-cased. */
  readonly headers: Readonly<Record<string, string>>;
}

export interface OtlpReceiver {
  /** `http://127.0.0.1:port`, for OTEL_EXPORTER_OTLP_ENDPOINT. */
  readonly endpoint: string;
  readonly spans: readonly ReceivedSpan[];
  /** The metrics of each metric export, in the order they came. */
  readonly metricExports: ReadonlyArray<readonly ReceivedMetric[]>;
  readonly exports: readonly ReceivedExport[];
  close(): Promise<void>;
}

type Decoded = Record<string, unknown>;

function value(any: Decoded | undefined): Value {
  if (any === undefined) return '';
  if (any.string_value !== undefined) return any.string_value as string;
  if (any.bool_value !== undefined) return any.bool_value as boolean;
  if (any.int_value !== undefined) return Number(any.int_value);
  if (any.double_value !== undefined) return any.double_value as number;
  const array = any.array_value as { values?: Decoded[] } | undefined;
  return (array?.values ?? []).map(value);
}

function attributes(list: unknown): Record<string, Value> {
  const out: Record<string, Value> = {};
  for (const kv of (list as Array<{ key: string; value?: Decoded }> | undefined) ?? []) {
    out[kv.key] = value(kv.value);
  }
  return out;
}

const hex = (bytes: unknown) =>
  Buffer.from((bytes as Uint8Array | undefined) ?? []).toString('hex');

/** The spans of one ExportTraceServiceRequest. */
export function decodeSpans(body: Uint8Array): ReceivedSpan[] {
  const request = exportRequest.toObject(exportRequest.decode(body), {
    longs: String,
    enums: String,
    defaults: true,
  });
  const spans: ReceivedSpan[] = [];
  for (const resourceSpans of request.resource_spans as Decoded[]) {
    const resource = attributes((resourceSpans.resource as Decoded | undefined)?.attributes);
    for (const scopeSpans of resourceSpans.scope_spans as Decoded[]) {
      const scope = String((scopeSpans.scope as Decoded | undefined)?.name ?? '');
      for (const span of scopeSpans.spans as Decoded[]) {
        const status = (span.status as Decoded | undefined) ?? {};
        spans.push({
          traceId: hex(span.trace_id),
          spanId: hex(span.span_id),
          parentSpanId: hex(span.parent_span_id),
          name: span.name as string,
          kind: span.kind as string,
          attributes: attributes(span.attributes),
          status: {
            code: String(status.code ?? 'STATUS_CODE_UNSET'),
            message: String(status.message ?? ''),
          },
          scope,
          resource,
        });
      }
    }
  }
  return spans;
}

function points(list: unknown): ReceivedPoint[] {
  return ((list as Decoded[] | undefined) ?? []).map((point) => {
    const attributesOf = { attributes: attributes(point.attributes) };
    if (point.count === undefined) {
      return { ...attributesOf, value: Number(point.as_int ?? point.as_double ?? 0) };
    }
    return {
      ...attributesOf,
      count: Number(point.count),
      sum: Number(point.sum ?? 0),
      bucketCounts: ((point.bucket_counts as unknown[] | undefined) ?? []).map(Number),
      bounds: ((point.explicit_bounds as unknown[] | undefined) ?? []).map(Number),
    };
  });
}

/** The metrics of one ExportMetricsServiceRequest. */
export function decodeMetrics(body: Uint8Array): ReceivedMetric[] {
  const request = exportMetricsRequest.toObject(exportMetricsRequest.decode(body), {
    longs: String,
    enums: String,
    oneofs: true,
    defaults: false,
  });
  const metrics: ReceivedMetric[] = [];
  for (const resourceMetrics of (request.resource_metrics as Decoded[] | undefined) ?? []) {
    const resource = attributes((resourceMetrics.resource as Decoded | undefined)?.attributes);
    for (const scopeMetrics of (resourceMetrics.scope_metrics as Decoded[] | undefined) ?? []) {
      const scope = (scopeMetrics.scope as Decoded | undefined) ?? {};
      for (const metric of (scopeMetrics.metrics as Decoded[] | undefined) ?? []) {
        const type = metric.data as ReceivedMetric['type'];
        const data = (metric[type] as Decoded | undefined) ?? {};
        metrics.push({
          name: metric.name as string,
          description: String(metric.description ?? ''),
          unit: String(metric.unit ?? ''),
          type,
          temporality: String(data.aggregation_temporality ?? ''),
          monotonic: data.is_monotonic === true,
          points: points(data.data_points),
          scope: String(scope.name ?? ''),
          scopeVersion: String(scope.version ?? ''),
          resource,
        });
      }
    }
  }
  return metrics;
}

function flatHeaders(headers: Readonly<Record<string, unknown>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, raw] of Object.entries(headers)) {
    out[key.toLowerCase()] = Array.isArray(raw) ? raw.join(', ') : String(raw);
  }
  return out;
}

/** What a receiver holds, filled as exports arrive. */
function received() {
  const spans: ReceivedSpan[] = [];
  const metricExports: ReceivedMetric[][] = [];
  const exports: ReceivedExport[] = [];
  return {
    spans,
    metricExports,
    exports,
    /** Keeps one export's content, and encodes the answer of its service. */
    take(signal: 'traces' | 'metrics', body: Uint8Array): Uint8Array {
      if (signal === 'metrics') {
        metricExports.push(decodeMetrics(body));
        return exportMetricsResponse.encode(exportMetricsResponse.fromObject({})).finish();
      }
      spans.push(...decodeSpans(body));
      return exportResponse.encode(exportResponse.fromObject({})).finish();
    },
  };
}

/**
 * Receives OTLP/HTTP with protobuf bodies: metrics on a path that ends in /metrics, as a
 * collector's /v1/metrics does, and spans on any other.
 */
export async function startHttpReceiver(): Promise<OtlpReceiver> {
  const { take, ...held } = received();
  const server = createHttpServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      if (
        request.method !== 'POST' ||
        request.headers['content-type'] !== 'application/x-protobuf'
      ) {
        response.writeHead(415).end();
        return;
      }
      const path = request.url ?? '';
      held.exports.push({ path, headers: flatHeaders(request.headers) });
      const body = take(/\/metrics$/.test(path) ? 'metrics' : 'traces', Buffer.concat(chunks));
      response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    endpoint: `http://127.0.0.1:${port}`,
    ...held,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const EXPORT_PATHS = {
  traces: '/opentelemetry.proto.collector.trace.v1.TraceService/Export',
  metrics: '/opentelemetry.proto.collector.metrics.v1.MetricsService/Export',
} as const;

/** Receives OTLP/gRPC: TraceService/Export and MetricsService/Export. */
export async function startGrpcReceiver(): Promise<OtlpReceiver> {
  const { take, ...held } = received();
  const server = new grpc.Server();
  for (const signal of ['traces', 'metrics'] as const) {
    const path = EXPORT_PATHS[signal];
    server.addService(
      {
        Export: {
          path,
          requestStream: false,
          responseStream: false,
          requestSerialize: (bytes: Buffer) => bytes,
          requestDeserialize: (bytes: Buffer) => bytes,
          responseSerialize: (bytes: Uint8Array) => Buffer.from(bytes),
          responseDeserialize: (bytes: Buffer) => bytes,
        },
      },
      {
        Export(
          call: grpc.ServerUnaryCall<Buffer, Uint8Array>,
          callback: grpc.sendUnaryData<Uint8Array>,
        ) {
          held.exports.push({ path, headers: flatHeaders(call.metadata.toJSON()) });
          callback(null, take(signal, call.request));
        },
      },
    );
  }
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
  return {
    endpoint: `http://127.0.0.1:${port}`,
    ...held,
    close: () =>
      new Promise((resolve) => {
        server.tryShutdown(() => resolve());
      }),
  };
}

/** A port that counts the connections made to it and answers none: for "nothing was sent". */
export async function startConnectionCounter(): Promise<{
  readonly endpoint: string;
  connections(): number;
  close(): Promise<void>;
}> {
  let connections = 0;
  const server = createNetServer((socket) => {
    connections++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    endpoint: `http://127.0.0.1:${port}`,
    connections: () => connections,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
