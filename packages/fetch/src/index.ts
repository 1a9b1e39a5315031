// @sentinel/fetch: wraps a fetch API handler (Bun.serve, Deno.serve, a Next.js route handler) in core's HTTP limiter.
import type {
  Decision,
  FetchRequestLike,
  HttpLimiterOptions,
  Limiter,
  TrustProxy,
} from '@sentinel/core';
import {
  abandoned,
  adapterLimiter,
  adapterOptions,
  admitted,
  checkFunction,
  following,
  RequestFields,
  refusal,
  runtimeAddress,
} from '@sentinel/core/internal';

export type { FetchRequestLike, HeaderRecord, TrustProxy } from '@sentinel/core';
export * from '@sentinel/core/adapter';

/**
 * A fetch API handler: a request (a subclass such as Next.js's `NextRequest` too), and whatever
 * else the runtime passes beside it.
 */
export type FetchHandler<Args extends unknown[] = unknown[], R extends Request = Request> = (
  request: R,
  ...args: Args
) => Response | Promise<Response>;

/** What `identify`, `skip`, `cost` and the other options' functions get for a request. */
export interface RateLimitRequest<Args extends unknown[] = unknown[]> extends FetchRequestLike {
  /** What the runtime passed beside the request: Bun's server, Deno's `info`, Next.js's context. */
  readonly args: Args;
}

export interface WithRateLimitOptions<Args extends unknown[] = unknown[]>
  extends HttpLimiterOptions<RateLimitRequest<Args>, Response> {
  /**
   * The address of the connection a request came on, from the runtime. The default reads Bun's
   * server (`server.requestIP(request)`), Deno's `info.remoteAddr` and @hono/node-server's
   * `incoming`, passed beside the request; elsewhere (a Next.js route handler) there is none
   * unless you give it. Never a request header:
   * `trustProxy` says which of those to believe.
   * @default Bun's `server.requestIP(request)?.address`, or Deno's `info.remoteAddr.hostname`
   * @example (request, server: Bun.Server) => server.requestIP(request)?.address
   */
  clientIp?: (request: Request, ...args: Args) => string | null | undefined;
  /**
   * Which proxies' X-Forwarded-For to believe, as Express's `trust proxy` reads it: `false`, a
   * number of hops, addresses or CIDR ranges (or `'loopback'`), a function, or `true` (every
   * hop, so the left-most entry, which any client can write).
   * @default false (the connection's address is the client's)
   * @example 1
   */
  trustProxy?: TrustProxy;
  /**
   * Answers requests refused by their limits instead of the problem+json body: a 429, a 403
   * past the `ban` count, or a 403 for a cost larger than a limit. The RateLimit headers, and
   * `Retry-After` with a 429, are added to what it returns. A 401 for a rejected API key and a
   * 503 when failing closed keep their problem bodies.
   * @default undefined (a problem+json body)
   * @example (req, decision) => Response.json({ retryIn: decision.retryAfterMs }, { status: 429 })
   */
  handler?: (req: RateLimitRequest<Args>, decision: Decision) => Response | Promise<Response>;
}

/** The wrapped handler, with the limiter behind it. */
export interface RateLimitedHandler<
  Args extends unknown[] = unknown[],
  R extends Request = Request,
> {
  (request: R, ...args: Args): Promise<Response>;
  /** The core limiter, for `peek` and `reset`. */
  readonly limiter: Limiter;
  /** Stops timers and closes the stores the limiter created; a Redis client you passed stays open. */
  close(): Promise<void>;
}

/** The options of this adapter alone, beside core's: a misspelling of one is named too. */
const FETCH_ONLY = ['clientIp', 'trustProxy', 'handler'] satisfies readonly Exclude<
  keyof WithRateLimitOptions,
  keyof HttpLimiterOptions
>[];

/** The decision each admitted request was passed on with, for `decisionOf`. */
const decisions = new WeakMap<Request, Decision>();

/**
 * Sentinel's decision for a request the wrapped handler got: its limit, what remains, when it
 * resets. Undefined when none was made (skipped or allow-listed).
 * @example const remaining = decisionOf(request)?.remaining
 */
export function decisionOf(request: Request): Decision | undefined {
  return decisions.get(request);
}

/** The connection's address where Bun's server, Deno's `info` or @hono/node-server's bindings come beside the request. */
function runtimeClientIp(request: Request, ...args: unknown[]): string | undefined {
  return runtimeAddress(request, args[0]);
}

/**
 * Rate limits every request `handler` gets, and returns a handler of the same shape: a refused
 * request is answered here, an admitted one gets its RateLimit headers on the handler's response.
 * Concurrency slots are held until that response's body has been sent, or its client has left.
 * @example Bun.serve({ fetch: withRateLimit(fetch, { redis, limit: 100, window: '1m' }) })
 */
export function withRateLimit<Args extends unknown[], R extends Request = Request>(
  handler: FetchHandler<Args, R>,
  options: WithRateLimitOptions<Args>,
): RateLimitedHandler<Args, R> {
  checkFunction(handler, 'withRateLimit(handler)');
  const given = adapterOptions(options, 'options', FETCH_ONLY);
  const { clientIp = runtimeClientIp, trustProxy, handler: refused, ...rest } = given;
  checkFunction(clientIp, 'clientIp');
  if (refused !== undefined) checkFunction(refused, 'handler');
  const fields = new RequestFields(trustProxy, 'clientIp');
  type Req = RateLimitRequest<Args>;
  const { http, connection } = adapterLimiter<Req, Response, typeof rest>(rest);

  async function sentinelRateLimit(request: R, ...args: Args): Promise<Response> {
    const req: Req = { ...fields.of(request, clientIp(request, ...args)), args };
    fields.checkAddress(req, (error) => http.report(error, req));
    // A verdict that came at once (a quota lease's) is used without a promise turn.
    const checked = http.check(req);
    const verdict = checked instanceof Promise ? await checked : checked;
    if (verdict.action === 'respond') return refusal(verdict, req, refused);
    if (verdict.decision !== undefined) decisions.set(request, verdict.decision);
    const end = following(http, verdict, req);
    let response: Response;
    try {
      response = await handler(request, ...args);
    } catch (error) {
      abandoned(http, verdict, req, end);
      throw error;
    }
    return admitted(http, verdict, req, response, end);
  }

  return Object.assign(sentinelRateLimit, {
    limiter: http.limiter,
    async close() {
      await http.close();
      await connection.close();
    },
  });
}
