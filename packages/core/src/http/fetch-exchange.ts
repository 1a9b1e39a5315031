// One fetch API request through an HTTP limiter: the adapter's side, shared by @sentinel/fetch and @sentinel/hono.
import { SentinelError } from '../shared/errors.ts';
import type { Decision } from '../shared/types.ts';
import { handlerAnswers } from './adapter-options.ts';
import { type FetchRequestLike, type HeaderRecord, headerRecord } from './fetch-request.ts';
import { ResponseEnd, refusalResponse, withHeaders } from './fetch-response.ts';
import type { HttpLimiter } from './http-limiter.ts';
import { type ClientAddress, resolveTrustProxy, type TrustProxy } from './trust-proxy.ts';
import type { Verdict } from './verdict.ts';

/** A request's fields every fetch adapter gives its options' functions. */
export interface FetchRequestFields {
  request: Request;
  headers: HeaderRecord;
  ip: string | undefined;
}

/**
 * How a fetch adapter reads a request: its headers, and its client address from the runtime's
 * connection, then X-Forwarded-For as far as `trustProxy` believes it.
 */
export class RequestFields {
  readonly #clientAddress: ClientAddress;
  readonly #forwarded: boolean;
  readonly #option: string;
  #reported = false;

  /** `option` is the adapter's option that gives the connection's address, for the report. */
  constructor(trustProxy: TrustProxy | undefined, option: string) {
    this.#clientAddress = resolveTrustProxy(trustProxy);
    this.#forwarded = trustProxy !== undefined && trustProxy !== false;
    this.#option = option;
  }

  of(request: Request, connection: string | null | undefined): FetchRequestFields {
    const forwardedFor = this.#forwarded ? request.headers.get('x-forwarded-for') : null;
    const ip = this.#clientAddress(connection || undefined, forwardedFor);
    return { request, headers: headerRecord(request.headers), ip };
  }

  /**
   * Reports the first request without a client address, naming the option that gives one. Such
   * requests are counted together, under one identity, which holds the limit but shares it.
   */
  checkAddress(fields: FetchRequestFields, report: (error: Error) => void): void {
    if (fields.ip !== undefined || this.#reported) return;
    this.#reported = true;
    report(
      new SentinelError(
        'NO_CLIENT_ADDRESS',
        `the runtime gave no client address for a request: pass \`${this.#option}\` for your runtime. Until then, requests without one are counted together, as one client`,
      ),
    );
  }
}

/** What runtimes pass beside a fetch API request, as far as the connection's address goes. */
interface RuntimeBindings {
  /** @hono/node-server's: the Node request (under `server` when behind another binding). */
  incoming?: { socket?: { remoteAddress?: string } };
  server?: RuntimeBindings;
  /** Bun's server. */
  requestIP?: (request: Request) => { address?: string } | null;
  /** Deno's `info`. */
  remoteAddr?: { hostname?: string };
}

/**
 * The connection's address from what the runtime passed beside the request: Node's through
 * @hono/node-server, Bun's server, Deno's `info`. Undefined for anything else: a Next.js route
 * handler's context, a Cloudflare Worker's env.
 */
export function runtimeAddress(request: Request, beside: unknown): string | undefined {
  if (typeof beside !== 'object' || beside === null) return undefined;
  const bindings = (beside as RuntimeBindings).server ?? (beside as RuntimeBindings);
  if (bindings.incoming !== undefined) return bindings.incoming.socket?.remoteAddress;
  if (typeof bindings.requestIP === 'function') return bindings.requestIP(request)?.address;
  const hostname = bindings.remoteAddr?.hostname;
  return typeof hostname === 'string' ? hostname : undefined;
}

/** A refused request's answer: the adapter's `handler` where it answers, Sentinel's problem otherwise. */
export async function refusal<Req>(
  verdict: Extract<Verdict, { action: 'respond' }>,
  req: Req,
  handler: ((req: Req, decision: Decision) => Response | Promise<Response>) | undefined,
): Promise<Response> {
  if (handler === undefined || !handlerAnswers(verdict)) return refusalResponse(verdict);
  return withHeaders(await handler(req, verdict.decision), verdict.headers);
}

/**
 * Follows an admitted request whose response holds something (concurrency slots) or decides
 * something (refunds by outcome): undefined when nothing needs following. Begun before the
 * handler runs, so that a client leaving mid-handler releases its slots at once.
 */
export function following<Req extends FetchRequestLike>(
  http: HttpLimiter<Req, Response>,
  verdict: Verdict,
  req: Req,
): ResponseEnd | undefined {
  if (!http.follows(verdict)) return undefined;
  const end = new ResponseEnd(req.request.signal);
  http.releaseSlots(verdict, req, end);
  return end;
}

/**
 * An admitted request's response with the verdict's headers and, when it is followed, a body
 * that ends it once sent or abandoned.
 */
export function admitted<Req extends FetchRequestLike>(
  http: HttpLimiter<Req, Response>,
  verdict: Verdict,
  req: Req,
  response: Response,
  end: ResponseEnd | undefined,
): Response {
  const answered = withHeaders(response, verdict.headers);
  if (end === undefined) return answered;
  const watched = end.watch(answered);
  http.countOutcome(verdict, req, watched, end);
  return watched;
}

/** An admitted request whose handler threw: what it holds is released, and it counts as failed. */
export function abandoned<Req extends FetchRequestLike>(
  http: HttpLimiter<Req, Response>,
  verdict: Verdict,
  req: Req,
  end: ResponseEnd | undefined,
): void {
  if (end === undefined) return;
  end.end(false);
  http.countOutcome(verdict, req, new Response(null, { status: 500 }), end);
}
