// A local OTLP trace receiver, as a collector is one: OTLP/HTTP (protobuf on POST .../v1/traces)
// or OTLP/gRPC (TraceService/Export), each decoding what it gets into spans with their resource.
// Its messages are protobufjs types whose field numbers are copied from opentelemetry-proto, so
// the exporter's encoding is checked against the specification, not against itself.
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

/** opentelemetry-proto's collector/trace/v1, trace/v1, resource/v1 and common/v1, flattened. */
const root = protobuf.Root.fromJSON({
  nested: {
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

function flatHeaders(headers: Readonly<Record<string, unknown>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, raw] of Object.entries(headers)) {
    out[key.toLowerCase()] = Array.isArray(raw) ? raw.join(', ') : String(raw);
  }
  return out;
}

/** Receives OTLP/HTTP with protobuf bodies on any path, as a collector does on /v1/traces. */
export async function startHttpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const exports: ReceivedExport[] = [];
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
      exports.push({ path: request.url ?? '', headers: flatHeaders(request.headers) });
      spans.push(...decodeSpans(Buffer.concat(chunks)));
      const body = exportResponse.encode(exportResponse.fromObject({})).finish();
      response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    endpoint: `http://127.0.0.1:${port}`,
    spans,
    exports,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const EXPORT_PATH = '/opentelemetry.proto.collector.trace.v1.TraceService/Export';

/** Receives OTLP/gRPC: opentelemetry.proto.collector.trace.v1.TraceService/Export. */
export async function startGrpcReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const exports: ReceivedExport[] = [];
  const server = new grpc.Server();
  server.addService(
    {
      Export: {
        path: EXPORT_PATH,
        requestStream: false,
        responseStream: false,
        requestSerialize: (bytes: Buffer) => bytes,
        requestDeserialize: (bytes: Buffer) => bytes,
        responseSerialize: (message: object) =>
          Buffer.from(exportResponse.encode(exportResponse.fromObject(message)).finish()),
        responseDeserialize: (bytes: Buffer) => bytes,
      },
    },
    {
      Export(call: grpc.ServerUnaryCall<Buffer, object>, callback: grpc.sendUnaryData<object>) {
        exports.push({ path: EXPORT_PATH, headers: flatHeaders(call.metadata.toJSON()) });
        spans.push(...decodeSpans(call.request));
        callback(null, {});
      },
    },
  );
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
  return {
    endpoint: `http://127.0.0.1:${port}`,
    spans,
    exports,
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
