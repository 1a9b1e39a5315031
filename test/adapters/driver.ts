// The one shape every adapter's test app takes, so the conformance suite runs the same scenarios on all.
import type { Decision, HttpLimiterOptions } from '@sentinel/core';

/** A route of the test app. Each answers 200 with `RouteBody`. */
export interface RouteSpec {
  /** GET path, such as '/search'. */
  path: string;
  /**
   * This route's own limits, in the framework's per-route idiom, applied instead of the app's:
   * options merged over the app's options, or false for no limit on this route.
   */
  rateLimit?: Partial<HttpLimiterOptions> | false;
  /**
   * What the route's handler does before it answers, after the limit admitted it: a rejection
   * is thrown from the handler, for the framework to answer as it answers errors.
   */
  work?: () => Promise<void>;
}

export interface AppSpec {
  /** The adapter options for the whole app (every route without its own `rateLimit`). */
  options: HttpLimiterOptions;
  /** Routes besides GET '/', which every app has. */
  routes?: RouteSpec[];
  /**
   * Trust X-Forwarded-For for the client IP, in the framework's own way: every hop, none, or
   * `'loopback'`, one proxy at the test's own address, so that the client IP is the last entry
   * (Express and Fastify trust that address; Koa counts one hop, `maxIpsCount`). @default true
   */
  trustProxy?: boolean | 'loopback';
  /**
   * Installs the adapter's `handler` option, in the framework's idiom, answering every refusal
   * with status 418 and the body `{ custom: true, policy: decision.policy }`.
   */
  customHandler?: boolean;
}

/** What every route answers with status 200: the decision the adapter exposed to the route. */
export interface RouteBody {
  ok: true;
  /**
   * `req.rateLimit` / `ctx.state.rateLimit` / `request.rateLimit`; null when the adapter
   * exposed undefined, its "no decision", which JSON cannot carry.
   */
  rateLimit: Decision | null;
}

export interface RunningApp {
  /** Base URL such as http://127.0.0.1:PORT, served on a real socket. */
  url: string;
  close(): Promise<void>;
}

export interface AdapterDriver {
  name: 'express' | 'koa' | 'fastify';
  start(spec: AppSpec): Promise<RunningApp>;
}
