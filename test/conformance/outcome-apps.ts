// Apps whose routes answer what a request asks for (a status, a hang, a hold), in each adapter, for the count-by-outcome and ban suites.
import { createServer, type Server, type ServerResponse } from 'node:http';
import { afterEach, describe } from 'vitest';
import {
  createLimiter,
  type HttpLimiterOptions,
  type Limiter,
  type RequestLike,
} from '../../packages/core/src/index.ts';
import { mergeHttpLimiterOptions } from '../../packages/core/src/internal.ts';
import {
  rateLimit as expressRateLimit,
  type RateLimitMiddleware,
} from '../../packages/express/src/index.ts';
import { express5 } from '../../packages/express/test/apps.ts';
import { sentinel } from '../../packages/fastify/src/index.ts';
import {
  Fastify,
  type FastifyReply,
  type FastifyRequest,
} from '../../packages/fastify/test/framework.ts';
import { withRateLimit } from '../../packages/fetch/src/index.ts';
import { rateLimit as honoRateLimit } from '../../packages/hono/src/index.ts';
import {
  type Context,
  createAdaptorServer,
  Hono,
  type HttpBindings,
} from '../../packages/hono/test/apps.ts';
import { rateLimit as koaRateLimit } from '../../packages/koa/src/index.ts';
import { Koa } from '../../packages/koa/test/apps.ts';
import { RateLimit } from '../../packages/nestjs/src/index.ts';
import { Controller, Get, Req, Res } from '../../packages/nestjs/test/framework.ts';
import type { BuiltApp } from '../adapters/driver.ts';
import { createNestApp, type Platform } from '../adapters/nestjs.ts';
import { type AppClient, clientOf } from '../adapters/requests.ts';
import { closeServer, listen } from '../adapters/server.ts';
import { STORES, type StoreName, type StoreSetup } from './adapters.ts';

/** Options every adapter takes as they are; `requestWasSuccessful` comes in each one's idiom. */
export type OutcomeOptions = Omit<HttpLimiterOptions<RequestLike>, 'requestWasSuccessful'>;

export interface OutcomeAppSpec {
  options: OutcomeOptions;
  /** The options of GET /login, layered over the app's in the adapter's per-route idiom. */
  login?: Partial<OutcomeOptions>;
  /** Installs an async `requestWasSuccessful`, in the adapter's idiom, true for this status alone. */
  successIs?: number;
}

/**
 * What the routes saw. A request's headers say what it gets: `x-status` the status (200 without
 * it); `x-hang` makes it wait until its client leaves, then answer; `x-hold` makes it wait for
 * `release()`.
 */
export class Room {
  /** Requests that reached a route. */
  handled = 0;
  /** Requests whose client left before the route answered. */
  left = 0;
  #release!: () => void;
  #held = new Promise<void>((resolve) => {
    this.#release = resolve;
  });

  release(): void {
    this.#release();
  }

  /** The status to answer, once the request's waits are over. */
  async serve(headers: RequestLike['headers'], raw: ServerResponse): Promise<number> {
    this.handled++;
    const gone = new Promise<void>((resolve) => {
      raw.once('close', () => {
        if (!raw.writableFinished) this.left++;
        resolve();
      });
    });
    if (headers['x-hang'] !== undefined) await gone;
    if (headers['x-hold'] !== undefined) await this.#held;
    return Number(headers['x-status'] ?? 200);
  }
}

/** A driver's app in process, with what its routes saw. */
export interface BuiltOutcomeApp extends BuiltApp {
  room: Room;
}

export interface OutcomeApp extends AppClient {
  room: Room;
  close(): Promise<void>;
}

export interface OutcomeDriver {
  name: 'express' | 'koa' | 'fastify' | 'hono' | 'fetch' | 'nest-express' | 'nest-fastify';
  build(spec: OutcomeAppSpec): Promise<BuiltOutcomeApp>;
}

const body = (status: number) => ({ ok: status < 400 });

/** Express's `Response`, as the middleware takes it: this folder does not resolve 'express'. */
type ExpressResponse = Parameters<RateLimitMiddleware>[1];

const express: OutcomeDriver = {
  name: 'express',
  async build({ options, login, successIs }) {
    const limit = expressRateLimit({
      ...options,
      ...(successIs !== undefined && {
        requestWasSuccessful: async (_req, res) => res.statusCode === successIs,
      }),
    });
    const room = new Room();
    const app = express5.app();
    const answer = async (req: RequestLike, res: ExpressResponse) => {
      const status = await room.serve(req.headers, res);
      res.status(status).json(body(status));
    };
    if (login) app.get('/login', limit.route(login), answer);
    app.use(limit);
    app.get(['/', '/login'], answer);
    const server = createServer(app);
    return {
      server,
      room,
      listen: () => listen(server),
      async close() {
        await closeServer(server);
        await limit.close();
      },
    };
  },
};

const koa: OutcomeDriver = {
  name: 'koa',
  async build({ options, login, successIs }) {
    const limit = koaRateLimit({
      ...options,
      ...(successIs !== undefined && {
        requestWasSuccessful: async (ctx) => ctx.status === successIs,
      }),
    });
    const loginLimit = login ? limit.route(login) : limit;
    const room = new Room();
    const app = new Koa();
    app.use(async function route(ctx, next) {
      if (ctx.path !== '/' && ctx.path !== '/login') return next();
      const limiter = ctx.path === '/login' ? loginLimit : limit;
      return limiter(ctx, async () => {
        const status = await room.serve(ctx.headers, ctx.res);
        ctx.status = status;
        ctx.body = body(status);
      });
    });
    const server = createServer(app.callback());
    return {
      server,
      room,
      listen: () => listen(server),
      async close() {
        await closeServer(server);
        await limit.close();
      },
    };
  },
};

const fastify: OutcomeDriver = {
  name: 'fastify',
  async build({ options, login, successIs }) {
    const app = Fastify();
    await app.register(sentinel, {
      ...options,
      ...(successIs !== undefined && {
        requestWasSuccessful: async (_request, reply) => reply.statusCode === successIs,
      }),
    });
    const room = new Room();
    const answer = async (request: FastifyRequest, reply: FastifyReply) => {
      const status = await room.serve(request.headers, reply.raw);
      return reply.code(status).send(body(status));
    };
    app.get('/', answer);
    app.get('/login', { config: login ? { rateLimit: login } : {} }, answer);
    await app.ready();
    return {
      server: app.server,
      room,
      listen: () => app.listen({ host: '127.0.0.1', port: 0 }),
      async close() {
        // Fastify drops the connections of a server it listened itself, not of one supertest did.
        app.server.closeAllConnections();
        await app.close();
      },
    };
  },
};

/** A fetch API request's headers as the room reads them: a record of lower-case names. */
const headersOf = (request: Request) => Object.fromEntries(request.headers);

/** A fetch API answer: the status the room gave, with its JSON body. */
const answerWith = (status: number) => Response.json(body(status), { status });

const hono: OutcomeDriver = {
  name: 'hono',
  async build({ options, login, successIs }) {
    const limit = honoRateLimit({
      ...options,
      ...(successIs !== undefined && {
        requestWasSuccessful: async (_req, res) => res.status === successIs,
      }),
    });
    const room = new Room();
    // @hono/node-server passes the Node response beside the request: the room hears it close.
    const answer = async (c: Context<{ Bindings: HttpBindings }>) =>
      answerWith(await room.serve(headersOf(c.req.raw), c.env.outgoing));
    const app = new Hono<{ Bindings: HttpBindings }>();
    try {
      app.get('/login', login ? limit.route(login) : limit, answer);
    } catch (error) {
      await limit.close();
      throw error;
    }
    app.get('/', limit, answer);
    const server = createAdaptorServer({ fetch: app.fetch }) as Server;
    return {
      server,
      room,
      listen: () => listen(server),
      async close() {
        await closeServer(server);
        await limit.close();
      },
    };
  },
};

/**
 * The fetch wrapper has no router and no route(): each path is a handler of its own, and
 * /login's options are layered over the app's by core's merge, as route() layers them.
 */
const fetchWrapper: OutcomeDriver = {
  name: 'fetch',
  async build({ options, login, successIs }) {
    const room = new Room();
    const answer = async (request: Request, env: HttpBindings) =>
      answerWith(await room.serve(headersOf(request), env.outgoing));
    const own = {
      ...options,
      ...(successIs !== undefined && {
        requestWasSuccessful: async (_req: unknown, res: Response) => res.status === successIs,
      }),
    };
    const root = withRateLimit(answer, own);
    let loginHandler = root;
    try {
      if (login) loginHandler = withRateLimit(answer, mergeHttpLimiterOptions(own, login));
    } catch (error) {
      await root.close();
      throw error;
    }
    const byPath = new Map([
      ['/', root],
      ['/login', loginHandler],
    ]);
    const server = createAdaptorServer({
      fetch: (request, env) => {
        const handler = byPath.get(new URL(request.url).pathname);
        return handler
          ? handler(request, env as HttpBindings)
          : new Response(null, { status: 404 });
      },
    }) as Server;
    return {
      server,
      room,
      listen: () => listen(server),
      async close() {
        await closeServer(server);
        await Promise.all([...new Set(byPath.values())].map((handler) => handler.close()));
      },
    };
  },
};

/**
 * Nest on either platform: the room's status is set through the platform's response, which
 * `requestWasSuccessful` gets as its second argument (Express's `res`, Fastify's `reply`).
 */
function nestOutcome(platform: Platform): OutcomeDriver {
  return {
    name: platform === 'express' ? 'nest-express' : 'nest-fastify',
    async build({ options, login, successIs }) {
      const room = new Room();
      class Routes {}
      const prototype = Routes.prototype as unknown as Record<string, unknown>;
      const add = (name: string, path: string, own?: Partial<OutcomeOptions>) => {
        prototype[name] = async (req: RequestLike, res: NestResponse) => {
          const raw = res.raw ?? (res as unknown as ServerResponse);
          const status = await room.serve(req.headers, raw);
          if (res.code) res.code(status);
          else res.status?.(status);
          return body(status);
        };
        const descriptor = Object.getOwnPropertyDescriptor(prototype, name) as PropertyDescriptor;
        Req()(prototype, name, 0);
        Res({ passthrough: true })(prototype, name, 1);
        Get(path)(prototype, name, descriptor);
        if (own) RateLimit(own)(prototype, name, descriptor);
      };
      add('root', '/');
      add('login', '/login', login);
      Controller()(Routes);
      const app = await createNestApp(
        platform,
        {
          options: {
            ...options,
            ...(successIs !== undefined && {
              requestWasSuccessful: async (_req: unknown, res: unknown) =>
                (res as { statusCode: number }).statusCode === successIs,
            }),
          },
        },
        Routes,
      );
      const server = app.getHttpServer() as Server;
      return {
        server,
        room,
        async listen() {
          await app.listen(0, '127.0.0.1');
          return (await app.getUrl()).replace('[::1]', '127.0.0.1');
        },
        async close() {
          server.closeAllConnections();
          await app.close();
        },
      };
    },
  };
}

/** Express's `res` or Fastify's `reply`, as a Nest handler gets it with `@Res()`. */
interface NestResponse {
  raw?: ServerResponse;
  code?(status: number): unknown;
  status?(status: number): unknown;
}

export const OUTCOME_DRIVERS: readonly OutcomeDriver[] = [
  express,
  koa,
  fastify,
  hono,
  fetchWrapper,
  nestOutcome('express'),
  nestOutcome('fastify'),
];

const running: OutcomeApp[] = [];
const peekers: Limiter[] = [];

afterEach(async () => {
  await Promise.all(running.splice(0).map((app) => app.close()));
  await Promise.all(peekers.splice(0).map((limiter) => limiter.close()));
});

/** Builds the driver's app, closed after the test unless the test closed it. */
export async function startOutcomeApp(
  driver: OutcomeDriver,
  spec: OutcomeAppSpec,
): Promise<OutcomeApp> {
  const built = await driver.build(spec);
  let closing: Promise<void> | undefined;
  const app = { ...clientOf(built), room: built.room, close: () => (closing ??= built.close()) };
  running.push(app);
  return app;
}

/** Runs `scenarios` once per adapter and store, as `<adapter> › <store> store › ...`. */
export function eachAdapter(
  scenarios: (driver: OutcomeDriver, store: StoreName) => void,
  storeNames: readonly StoreName[] = STORES,
): void {
  for (const driver of OUTCOME_DRIVERS) {
    describe(driver.name, () => {
      for (const store of storeNames) describe(`${store} store`, () => scenarios(driver, store));
    });
  }
}

/**
 * What is left of `key`'s one policy, read by a limiter of the test's own over the same store,
 * prefix and policy: the state the app's limiter keeps, without touching it.
 */
export function remainingOf(
  store: StoreSetup,
  policy: Pick<HttpLimiterOptions, 'limit' | 'window' | 'algorithm'>,
): (key: string) => Promise<number> {
  const limiter = createLimiter({ ...store.options, ...policy });
  peekers.push(limiter);
  return async (key) => (await limiter.peek(key)).remaining;
}

/** Sends GETs one after another, returning their statuses. */
export async function statuses(
  app: OutcomeApp,
  count: number,
  path = '/',
  headers: Record<string, string> = {},
): Promise<number[]> {
  const seen: number[] = [];
  for (let i = 0; i < count; i++) seen.push((await app.get(path, headers)).status);
  return seen;
}
