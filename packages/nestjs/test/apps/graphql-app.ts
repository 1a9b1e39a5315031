// A code-first GraphQL app (Apollo driver) on Express or Fastify with SentinelModule: the resolver the GraphQL tests query.
import 'reflect-metadata';
import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo';
import { type INestApplication, Module } from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import {
  Args,
  Context,
  GraphQLModule,
  Int,
  Mutation,
  Query,
  Resolver,
  Subscription,
} from '@nestjs/graphql';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import {
  RateLimit,
  SentinelGuard,
  SentinelModule,
  type SentinelModuleOptions,
  type SentinelRequest,
  SkipRateLimit,
} from '@sentinel/nestjs';

export type Platform = 'express' | 'fastify';

/** What the guard left on the request: the remaining budget of its decision, or -1 for none. */
function remainingOf(req: SentinelRequest): number {
  return req.rateLimit?.remaining ?? -1;
}

/** Waits for what a test lets go of, so that an operation stays in flight as long as the test needs. */
export const gates = new Map<string, (fail?: boolean) => void>();
function gate(name: string): Promise<void> {
  return new Promise((resolve, reject) =>
    gates.set(name, (fail) => (fail ? reject(new Error('the resolver failed')) : resolve())),
  );
}

@Resolver()
export class CatalogResolver {
  readonly #items: string[] = [];

  @Query(() => Int)
  remaining(@Context('req') req: SentinelRequest): number {
    return remainingOf(req);
  }

  @Query(() => String)
  hello(): string {
    return 'hello';
  }

  @Query(() => Int)
  itemCount(): number {
    return this.#items.length;
  }

  @Query(() => String)
  @SkipRateLimit()
  health(): string {
    return 'ok';
  }

  @Query(() => Int)
  @RateLimit({ group: 'search', limit: 2, window: '1m' })
  search(@Context('req') req: SentinelRequest): number {
    return remainingOf(req);
  }

  @Query(() => String)
  async held(@Args('name') name: string): Promise<string> {
    await gate(name);
    return name;
  }

  /** Counts to `to`, one event each: the guard runs once, when the subscription starts. */
  @Subscription(() => Int, { resolve: (tick: number) => tick })
  async *ticks(@Args('to', { type: () => Int }) to: number): AsyncGenerator<number> {
    for (let tick = 1; tick <= to; tick++) yield tick;
  }

  @Mutation(() => Int)
  addItem(@Args('name') name: string): number {
    this.#items.push(name);
    return this.#items.length;
  }
}

/**
 * `default`: the context Nest's Apollo driver builds itself, `{ req }`. `request-response`: the
 * context an app writes to reach the response, `{ req, res }` from Express's integration or
 * `{ request, reply }` from Fastify's (the driver adds `req`).
 */
export type GraphQLContextShape = 'default' | 'request-response';

export interface GraphQLAppOptions {
  platform: Platform;
  options: SentinelModuleOptions;
  /** @default 'default' */
  context?: GraphQLContextShape;
  /** Serves graphql-ws on /graphql too, for operations and subscriptions over a WebSocket. @default false */
  subscriptions?: boolean;
}

function graphqlContext(platform: Platform, shape: GraphQLContextShape) {
  if (shape === 'default') return undefined;
  if (platform === 'express') {
    return ({ req, res }: { req: unknown; res: unknown }) => ({ req, res });
  }
  return (request: unknown, reply: unknown) => ({ request, reply });
}

export function graphqlModule({
  platform,
  options,
  context = 'default',
  subscriptions = false,
}: GraphQLAppOptions) {
  @Module({
    imports: [
      SentinelModule.forRoot(options),
      GraphQLModule.forRoot<ApolloDriverConfig>({
        driver: ApolloDriver,
        autoSchemaFile: true,
        graphiql: false,
        // Errors as a production client sees them, without stack traces.
        includeStacktraceInErrorResponses: false,
        context: graphqlContext(platform, context),
        ...(subscriptions ? { subscriptions: { 'graphql-ws': true } } : {}),
      }),
    ],
    providers: [CatalogResolver, { provide: APP_GUARD, useClass: SentinelGuard }],
  })
  class GraphQLAppModule {}
  return GraphQLAppModule;
}

/** The app, initialised and not yet listening; trusts one proxy hop, so tests choose the client IP. */
export async function createGraphQLApp(app: GraphQLAppOptions): Promise<INestApplication> {
  const module = graphqlModule(app);
  if (app.platform === 'express') {
    const nest = await NestFactory.create<NestExpressApplication>(module, new ExpressAdapter(), {
      logger: false,
    });
    nest.set('trust proxy', true);
    return nest.init();
  }
  const nest = await NestFactory.create<NestFastifyApplication>(
    module,
    new FastifyAdapter({ trustProxy: true }),
    { logger: false },
  );
  await nest.init();
  await nest.getHttpAdapter().getInstance().ready();
  return nest;
}
