// The gRPC server: Envoy's ShouldRateLimit answered by a `decide` function, beside the standard
// health service. What to decide is not its business.
import {
  type ChannelOptions,
  type Metadata,
  Server,
  ServerCredentials,
  type ServerUnaryCall,
  type ServiceDefinition,
  type sendUnaryData,
  status,
} from '@grpc/grpc-js';
import { createHealthService, type HealthService } from './health-service.ts';
import { loadProtos } from './load-protos.ts';
import type { RateLimitRequestMessage, RateLimitResponseMessage } from './messages.ts';
import { requestFromWire, responseToWire, type WireRequest } from './proto-wire.ts';

export const RATE_LIMIT_SERVICE = 'envoy.service.ratelimit.v3.RateLimitService';
const HEALTH_SERVICE = 'grpc.health.v1.Health';

/** What `decide` may use besides the request. */
export interface DecideContext {
  /** Aborts when the client cancels the call or its deadline passes. */
  readonly signal: AbortSignal;
}

/** Answers one ShouldRateLimit. A throw answers the call with gRPC status UNKNOWN. */
export type Decide = (
  request: RateLimitRequestMessage,
  context: DecideContext,
) => Promise<RateLimitResponseMessage>;

/** How one ShouldRateLimit was answered: a response, or a gRPC status code with its details. */
export type CallOutcome =
  | { readonly code: typeof status.OK; readonly response: object }
  | { readonly code: number; readonly details: string; readonly error: unknown };

/** What a {@link TraceCall} sees of the call: its metadata and the peer's address. */
export interface TracedCall {
  readonly metadata: Metadata;
  /** grpc-js's `getPeer()`: `host:port`, or `unknown`. */
  readonly peer: string;
}

/** Wraps the answering of each ShouldRateLimit, in a span for one; resolves to what `answer` did. */
export type TraceCall = (
  call: TracedCall,
  answer: () => Promise<CallOutcome>,
) => Promise<CallOutcome>;

export interface GrpcServerOptions {
  /** @default '0.0.0.0', as envoyproxy/ratelimit's GRPC_HOST */
  readonly host?: string | undefined;
  /** 0 picks a free port. @default 8081, as envoyproxy/ratelimit's GRPC_PORT */
  readonly port?: number | undefined;
  readonly decide: Decide;
  /** @default ServerCredentials.createInsecure() */
  readonly credentials?: ServerCredentials | undefined;
  /**
   * The service names Health answers for; any other is NOT_FOUND. 'ratelimit' is the name
   * envoyproxy/ratelimit reports under, so probes written for it keep working.
   * @default ['', 'envoy.service.ratelimit.v3.RateLimitService', 'ratelimit']
   */
  readonly healthServices?: readonly string[] | undefined;
  /** Hears what `decide` threw, or a response it gave that cannot be encoded. */
  readonly onError?: ((error: unknown) => void) | undefined;
  /** How long `close()` lets calls in flight finish before it cuts them. @default 5000 */
  readonly shutdownTimeoutMs?: number | undefined;
  /** grpc-js server options, such as `'grpc.max_receive_message_length'`. */
  readonly channelOptions?: ChannelOptions | undefined;
  /** Wraps each ShouldRateLimit, as tracing does with its server span; none by default. */
  readonly traceCall?: TraceCall | undefined;
}

export interface GrpcServer {
  /** The port bound: the one asked for, or the one picked for port 0. */
  readonly port: number;
  readonly server: Server;
  /** Health turns NOT_SERVING (false) or SERVING (true) for every name it answers for. */
  setServing(serving: boolean): void;
  /** Turns NOT_SERVING, ends health watches, and stops once the calls in flight are answered. */
  close(): Promise<void>;
}

/**
 * Serves ShouldRateLimit and grpc.health.v1.Health, SERVING from the start.
 * @example
 * const grpc = await startGrpcServer({ port: 8081, decide: (request) => service.decide(request) });
 * process.once('SIGTERM', () => void grpc.close());
 */
export async function startGrpcServer(options: GrpcServerOptions): Promise<GrpcServer> {
  const {
    host = '0.0.0.0',
    port = 8081,
    decide,
    credentials = ServerCredentials.createInsecure(),
    healthServices = ['', RATE_LIMIT_SERVICE, 'ratelimit'],
    onError = () => {},
    shutdownTimeoutMs = 5000,
    channelOptions,
    traceCall,
  } = options;
  if (typeof decide !== 'function') throw new TypeError('decide must be a function');
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new TypeError(`port must be an integer from 0 to 65535, got ${port}`);
  }
  if (!(shutdownTimeoutMs >= 0)) {
    throw new TypeError(`shutdownTimeoutMs must be 0 or more, got ${shutdownTimeoutMs}`);
  }

  const definitions = loadProtos();
  const server = new Server(channelOptions);
  const health = createHealthService(healthServices);
  server.addService(definitions[RATE_LIMIT_SERVICE] as ServiceDefinition, {
    ShouldRateLimit: answerWith(decide, onError, traceCall),
  });
  server.addService(definitions[HEALTH_SERVICE] as ServiceDefinition, health.implementation);
  const bound = await bind(server, host, port, credentials);
  let closing: Promise<void> | undefined;
  return {
    port: bound,
    server,
    setServing: health.setServing,
    close() {
      closing ??= shutdown(server, health, shutdownTimeoutMs);
      return closing;
    },
  };
}

function answerWith(
  decide: Decide,
  onError: (error: unknown) => void,
  traceCall: TraceCall | undefined,
) {
  return async function shouldRateLimit(
    call: ServerUnaryCall<WireRequest, object>,
    callback: sendUnaryData<object>,
  ): Promise<void> {
    // Built only when `decide` reads it: an AbortController per call costs more than a decision.
    let cancelled: AbortController | undefined;
    let ended = false;
    call.on('cancelled', () => {
      ended = true;
      cancelled?.abort();
    });
    const context: DecideContext = {
      get signal() {
        cancelled ??= new AbortController();
        if (ended) cancelled.abort();
        return cancelled.signal;
      },
    };
    const answer = async (): Promise<CallOutcome> => {
      try {
        const request = requestFromWire(call.request);
        return { code: status.OK, response: responseToWire(await decide(request, context)) };
      } catch (error) {
        // UNKNOWN, as grpc-go answers the error envoyproxy/ratelimit's service returns, unless
        // the error names a status of its own (UNAVAILABLE, for a failure mode that says so).
        const own = (error as { grpcStatus?: unknown } | undefined)?.grpcStatus;
        return {
          code: typeof own === 'number' ? own : status.UNKNOWN,
          details: error instanceof Error ? error.message : String(error),
          error,
        };
      }
    };
    const outcome =
      traceCall === undefined
        ? await answer()
        : await traceCall({ metadata: call.metadata, peer: call.getPeer() }, answer);
    if ('response' in outcome) {
      callback(null, outcome.response);
      return;
    }
    callback({ code: outcome.code, details: outcome.details });
    onError(outcome.error);
  };
}

function bind(
  server: Server,
  host: string,
  port: number,
  credentials: ServerCredentials,
): Promise<number> {
  const address =
    host.includes(':') && !host.startsWith('[') ? `[${host}]:${port}` : `${host}:${port}`;
  return new Promise((resolve, reject) => {
    server.bindAsync(address, credentials, (error, bound) =>
      error ? reject(error) : resolve(bound),
    );
  });
}

function shutdown(server: Server, health: HealthService, timeoutMs: number): Promise<void> {
  health.setServing(false);
  health.endWatches();
  return new Promise((resolve) => {
    const cut = setTimeout(() => {
      server.forceShutdown();
      resolve();
    }, timeoutMs);
    server.tryShutdown(() => {
      clearTimeout(cut);
      resolve();
    });
  });
}
