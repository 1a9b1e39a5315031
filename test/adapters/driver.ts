// The one shape every adapter's test app takes, so the conformance suite runs the same scenarios on all.
import type { Server } from 'node:http';
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

/** The app in process: its server built but not listening, for supertest to drive. */
export interface BuiltApp {
  /**
   * The app's server, not yet listening: supertest listens it on 127.0.0.1 while its requests
   * are pending and closes it after the last one.
   */
  server: Server;
  /**
   * Serves the app on a real socket, for a test whose subject is the connection itself; resolves
   * with its base URL, such as http://127.0.0.1:PORT. Call it before any request through
   * supertest: a server supertest started is supertest's to close.
   */
  listen(): Promise<string>;
  /** Closes the server if it listens, dropping its connections, then the limiter. */
  close(): Promise<void>;
}

/** The app served on a real socket, for suites that bring their own client and processes. */
export interface RunningApp {
  /** Base URL such as http://127.0.0.1:PORT, served on a real socket. */
  url: string;
  close(): Promise<void>;
}

export interface AdapterDriver {
  name: 'express' | 'koa' | 'fastify' | 'hono' | 'fetch' | 'nest-express' | 'nest-fastify';
  /** The app in process, for the conformance suite's supertest requests. */
  build(spec: AppSpec): Promise<BuiltApp>;
  /** The app on a real socket: `build`, then `listen`. */
  start(spec: AppSpec): Promise<RunningApp>;
}

/** Serves a built app on a real socket, closing it if it cannot listen: each driver's `start`. */
export async function served(app: BuiltApp): Promise<RunningApp> {
  try {
    return { url: await app.listen(), close: () => app.close() };
  } catch (error) {
    await app.close();
    throw error;
  }
}
