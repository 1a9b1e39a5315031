// The server span of each ShouldRateLimit, as envoyproxy/ratelimit's otelgrpc interceptor
// (v0.53) makes it: kind SERVER, named after the method, the caller's trace continued from the
// call's metadata, and the gRPC status on it. Loaded only with tracing on.
import { type Metadata, status } from '@grpc/grpc-js';
import {
  type Attributes,
  context,
  propagation,
  SpanKind,
  SpanStatusCode,
  type TextMapGetter,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import { RATE_LIMIT_SERVICE, type TraceCall } from './grpc-server.ts';

const METHOD = 'ShouldRateLimit';
/** otelgrpc names a span by the full method without its leading slash. */
export const SERVER_SPAN_NAME = `${RATE_LIMIT_SERVICE}/${METHOD}`;

/**
 * The codes otelgrpc marks as the server's error. The others, OVER_LIMIT answered with OK among
 * them, leave the status unset: a cancelled call or a bad argument is the caller's doing.
 */
const SERVER_ERRORS: ReadonlySet<number> = new Set([
  status.UNKNOWN,
  status.DEADLINE_EXCEEDED,
  status.UNIMPLEMENTED,
  status.INTERNAL,
  status.UNAVAILABLE,
  status.DATA_LOSS,
]);

/** Reads propagation headers (traceparent, b3, baggage) from gRPC metadata, text values only. */
const metadataGetter: TextMapGetter<Metadata> = {
  keys: (metadata) => Object.keys(metadata.getMap()),
  get(metadata, key) {
    const values = metadata.get(key).filter((value): value is string => typeof value === 'string');
    if (values.length === 0) return undefined;
    return values.length === 1 ? values[0] : values;
  },
};

/**
 * Wraps each ShouldRateLimit in its server span, active while the call is answered, so that the
 * spans of the decision and of its store calls are its children.
 */
export function serverSpan(tracer: Tracer): TraceCall {
  return async function tracedShouldRateLimit(call, answer) {
    const parent = propagation.extract(context.active(), call.metadata, metadataGetter);
    const span = tracer.startSpan(SERVER_SPAN_NAME, { kind: SpanKind.SERVER }, parent);
    if (span.isRecording()) span.setAttributes(callAttributes(call.peer));
    try {
      const outcome = await context.with(trace.setSpan(parent, span), answer);
      span.setAttribute('rpc.grpc.status_code', outcome.code);
      if ('details' in outcome && SERVER_ERRORS.has(outcome.code)) {
        span.setStatus({ code: SpanStatusCode.ERROR, message: outcome.details });
      }
      return outcome;
    } finally {
      span.end();
    }
  };
}

/**
 * otelgrpc's attributes: the RPC's, and the peer's under the net.* names of the semantic
 * conventions it was built on (1.17), which dashboards made for upstream query.
 */
function callAttributes(peer: string): Attributes {
  const attributes: Attributes = {
    'rpc.system': 'grpc',
    'rpc.service': RATE_LIMIT_SERVICE,
    'rpc.method': METHOD,
  };
  // grpc-js gives `address:port`, an IPv6 address without brackets.
  const colon = peer.lastIndexOf(':');
  const port = Number(peer.slice(colon + 1));
  if (colon > 0 && Number.isInteger(port) && port > 0) {
    attributes['net.sock.peer.addr'] = peer.slice(0, colon).replace(/^\[(.*)\]$/, '$1');
    attributes['net.sock.peer.port'] = port;
  }
  return attributes;
}
