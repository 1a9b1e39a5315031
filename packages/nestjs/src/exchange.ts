// Each Nest context's extractor, written once: who is counted, where headers go, and which end releases the request's slots.

import type { ExecutionContext } from '@nestjs/common';
import type { NodeResponse } from '@sentinel/core/internal';
import type { SentinelRequest } from './options.ts';

/** What the guard needs of one call in any context. */
export interface Exchange {
  kind: 'http' | 'graphql' | 'ws';
  /** Who is counted: the HTTP request, or a WebSocket client's handshake. */
  request: SentinelRequest;
  /** The platform's response, given to `requestWasSuccessful`; absent on WebSockets. */
  response?: unknown;
  /** Writes a header to the response; absent where there is none. */
  setHeader?: (name: string, value: string) => void;
  /** The Node response whose 'close' ends the request; absent for a WebSocket message. */
  raw?: NodeResponse;
  /** A GraphQL operation over HTTP rather than graphql-ws: Apollo Server answers it. */
  overHttp?: boolean;
}

interface ExpressResponseLike extends NodeResponse {
  setHeader(name: string, value: string): unknown;
}

interface FastifyReplyLike {
  raw: NodeResponse;
  header(name: string, value: string): unknown;
}

type PlatformResponse = ExpressResponseLike | FastifyReplyLike;

function isFastifyReply(response: PlatformResponse): response is FastifyReplyLike {
  return (response as Partial<FastifyReplyLike>).raw !== undefined;
}

/** Express's `res` is the Node response itself; Fastify's `reply` holds it as `raw`. */
function httpExchange(
  kind: 'http' | 'graphql',
  request: SentinelRequest,
  response: PlatformResponse | undefined,
): Exchange {
  if (response === undefined) return { kind, request };
  if (isFastifyReply(response)) {
    return {
      kind,
      request,
      response,
      raw: response.raw,
      setHeader: (name, value) => response.header(name, value),
    };
  }
  return {
    kind,
    request,
    response,
    raw: response,
    setHeader: (name, value) => response.setHeader(name, value),
  };
}

interface NodeRequestLike {
  headers: SentinelRequest['headers'];
  ip?: string;
  socket?: { remoteAddress?: string };
  /** Express's request holds its response. */
  res?: PlatformResponse;
}

function isNodeRequest(value: unknown): value is NodeRequestLike {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as NodeRequestLike).headers === 'object'
  );
}

/**
 * A Node request without `ip` (a GraphQL subscription's upgrade request, say) gets its socket's
 * address, read through a prototype so that everything else set on it still shows.
 */
function withAddress(request: NodeRequestLike): SentinelRequest {
  if (request.ip !== undefined || request.socket?.remoteAddress === undefined) return request;
  return Object.create(request, { ip: { value: request.socket.remoteAddress } });
}

/** graphql-ws's context of an operation on a WebSocket: its connection's upgrade request. */
interface GraphQLWsContextLike {
  extra?: { request?: NodeRequestLike };
}

interface GraphQLContextLike {
  req?: NodeRequestLike | GraphQLWsContextLike;
  res?: PlatformResponse;
  request?: NodeRequestLike;
  reply?: PlatformResponse;
  extra?: { request?: NodeRequestLike };
}

/** An operation's HTTP request, and whether it came over HTTP or is a WebSocket's upgrade. */
interface OperationRequest {
  request: NodeRequestLike;
  overHttp: boolean;
}

/**
 * Where an operation's HTTP request is: Nest's Apollo driver puts `req` in the context, which is
 * Express's request, Fastify's (`request` too, when the app's context function names it so), or
 * over graphql-ws that library's context, which holds the connection's upgrade request; an app's
 * context function may also return graphql-ws's context itself.
 */
function operationRequest(graphql: GraphQLContextLike): OperationRequest | undefined {
  const { req, request } = graphql;
  if (isNodeRequest(req)) return { request: req, overHttp: true };
  if (isNodeRequest(request)) return { request, overHttp: true };
  const upgrade =
    (req as GraphQLWsContextLike | undefined)?.extra?.request ?? graphql.extra?.request;
  return isNodeRequest(upgrade) ? { request: upgrade, overHttp: false } : undefined;
}

/**
 * One request per GraphQL context, which Apollo and graphql-ws build per operation: a request
 * derived for an upgrade request (shared by every operation of its connection) is the same for
 * every top-level field of one operation, so that the guard counts the operation once.
 */
const derivedRequests = new WeakMap<object, SentinelRequest>();

/**
 * A resolver's arguments are (root, args, context, info). The response is the context's `res`
 * or `reply` when the app's context function passes it, else Express's own `req.res`; Fastify's
 * request does not hold its reply, and a WebSocket operation has none.
 */
function graphqlExchange(context: ExecutionContext): Exchange | undefined {
  const graphql = context.getArgByIndex<GraphQLContextLike | undefined>(2);
  if (typeof graphql !== 'object' || graphql === null) return undefined;
  const found = operationRequest(graphql);
  if (found === undefined) return undefined;
  const { request, overHttp } = found;
  let counted = derivedRequests.get(graphql);
  if (counted === undefined) {
    counted = withAddress(request);
    if (counted !== request) derivedRequests.set(graphql, counted);
  }
  const response = overHttp ? (graphql.res ?? graphql.reply ?? request.res) : undefined;
  return { ...httpExchange('graphql', counted, response), overHttp };
}

interface WsClientLike {
  /** socket.io: the handshake of the connection. */
  handshake?: { headers: SentinelRequest['headers']; address?: string };
  /** socket.io's upgrade request, or one an app's handleConnection kept on a ws client. */
  request?: NodeRequestLike;
  /** ws: the TCP socket. */
  _socket?: { remoteAddress?: string };
}

/** One request per connection: every message of a client is counted for the same identity. */
const wsRequests = new WeakMap<object, SentinelRequest>();

function wsRequest(client: WsClientLike): SentinelRequest {
  let request = wsRequests.get(client);
  if (request !== undefined) return request;
  const { handshake } = client;
  request = handshake
    ? { headers: handshake.headers, ip: handshake.address, client }
    : client.request
      ? Object.create(withAddress(client.request), { client: { value: client } })
      : { headers: {}, ip: client._socket?.remoteAddress, client };
  wsRequests.set(client, request as SentinelRequest);
  return request as SentinelRequest;
}

/** The call in an HTTP, GraphQL or WebSocket context; undefined in another (microservices). */
export function exchangeOf(context: ExecutionContext): Exchange | undefined {
  const type = context.getType<string>();
  if (type === 'http') {
    const http = context.switchToHttp();
    return httpExchange('http', http.getRequest(), http.getResponse());
  }
  if (type === 'graphql') return graphqlExchange(context);
  if (type === 'ws') {
    const client = context.switchToWs().getClient<WsClientLike | undefined>();
    return client === undefined ? undefined : { kind: 'ws', request: wsRequest(client) };
  }
  return undefined;
}
