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
}

/**
 * A Node request without `ip` (a GraphQL subscription's upgrade request, say) gets its socket's
 * address, read through a prototype so that everything else set on it still shows.
 */
function withAddress(request: NodeRequestLike): SentinelRequest {
  if (request.ip !== undefined || request.socket?.remoteAddress === undefined) return request;
  return Object.create(request, { ip: { value: request.socket.remoteAddress } });
}

interface GraphQLContextLike {
  req?: NodeRequestLike;
  res?: PlatformResponse;
  request?: NodeRequestLike;
  reply?: PlatformResponse;
  /** graphql-ws puts the upgrade request of a subscription's connection here. */
  extra?: { request?: NodeRequestLike };
}

/**
 * A resolver's arguments are (root, args, context, info). Apollo's context carries the HTTP
 * request and response as Nest's drivers set it: `req` and `res`, or `request` and `reply` when
 * the app's own context function names them so on Fastify.
 */
function graphqlExchange(context: ExecutionContext): Exchange | undefined {
  const graphql = context.getArgByIndex<GraphQLContextLike | undefined>(2);
  const request = graphql?.req ?? graphql?.request ?? graphql?.extra?.request;
  if (request === undefined) return undefined;
  return httpExchange('graphql', withAddress(request), graphql?.res ?? graphql?.reply);
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
