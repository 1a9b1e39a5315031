// Builds each adapter with options and nothing else, for the suites that check what it refuses.
import * as express from '../../packages/express/src/index.ts';
import * as fastify from '../../packages/fastify/src/index.ts';
import { Fastify } from '../../packages/fastify/test/framework.ts';
import * as fetchWrapper from '../../packages/fetch/src/index.ts';
import * as hono from '../../packages/hono/src/index.ts';
import * as koa from '../../packages/koa/src/index.ts';
import { SentinelModule } from '../../packages/nestjs/src/index.ts';
import { Module, NestFactory } from '../../packages/nestjs/test/framework.ts';

/** The handler the fetch wrapper is given: its options are the subject, not what it answers. */
const ok = () => new Response('ok');

/** Each adapter built with `options`, unchecked: it rejects with what construction throws. */
export const CONSTRUCT = {
  express: async (options: unknown) => void express.rateLimit(options as never),
  koa: async (options: unknown) => void koa.rateLimit(options as never),
  fastify: async (options: unknown) => {
    const app = Fastify();
    try {
      await app.register(fastify.sentinel, options as never);
      await app.ready();
    } finally {
      await app.close().catch(() => {});
    }
  },
  hono: async (options: unknown) => void hono.rateLimit(options as never),
  fetch: async (options: unknown) => void fetchWrapper.withRateLimit(ok, options as never),
  /** forRoot() checks the options' names; the app's creation builds the limiter from them. */
  nestjs: async (options: unknown) => {
    class AppModule {}
    Module({ imports: [SentinelModule.forRoot(options as never)] })(AppModule);
    const app = await NestFactory.create(AppModule, { logger: false, abortOnError: false });
    await app.close();
  },
};
