// The conformance suite's Nest drivers: a Nest app on Express and one on Fastify, with SentinelModule, the global guard and @RateLimit per route.
import type { Server } from 'node:http';
import type { Decision } from '../../packages/core/src/index.ts';
import {
  RateLimit,
  RateLimitException,
  SentinelGuard,
  SentinelModule,
  type SentinelRequest,
  SkipRateLimit,
} from '../../packages/nestjs/src/index.ts';
import {
  APP_GUARD,
  type ArgumentsHost,
  BaseExceptionFilter,
  Catch,
  Controller,
  ExpressAdapter,
  FastifyAdapter,
  Get,
  type INestApplication,
  Module,
  type NestExpressApplication,
  NestFactory,
  type NestFastifyApplication,
  Req,
} from '../../packages/nestjs/test/framework.ts';
import type { AdapterDriver, AppSpec, BuiltApp, RouteSpec } from './driver.ts';
import { served } from './driver.ts';

export type Platform = 'express' | 'fastify';

/**
 * The controller, with decorators applied as functions: the spec's routes are known only at run
 * time. The apps compiled as users compile them are in packages/nestjs/test/apps.
 */
export function controllerOf(
  routes: readonly RouteSpec[],
  answer: (req: SentinelRequest) => unknown = (req) => ({
    ok: true,
    rateLimit: (req.rateLimit as Decision | undefined) ?? null,
  }),
) {
  class Routes {}
  const prototype = Routes.prototype as unknown as Record<string, unknown>;
  const add = (name: string, path: string, route?: RouteSpec) => {
    prototype[name] = async (req: SentinelRequest) => {
      await route?.work?.();
      return answer(req);
    };
    const descriptor = Object.getOwnPropertyDescriptor(prototype, name) as PropertyDescriptor;
    Req()(prototype, name, 0);
    Get(path)(prototype, name, descriptor);
    if (route?.rateLimit === false) SkipRateLimit()(prototype, name, descriptor);
    else if (route?.rateLimit) RateLimit(route.rateLimit)(prototype, name, descriptor);
  };
  add('root', '/');
  for (const [index, route] of routes.entries()) add(`route${index}`, route.path, route);
  Controller()(Routes);
  return Routes;
}

/** Refusals by the limits answered 418 as the spec's custom handler; the rest as Nest does. */
class CustomRefusal extends BaseExceptionFilter {
  override catch(exception: RateLimitException, host: ArgumentsHost) {
    const handled = ['limited', 'banned', 'cost-exceeds-limit'].includes(exception.reason);
    if (!handled || exception.decision === undefined) return super.catch(exception, host);
    const adapter = this.httpAdapterHost?.httpAdapter ?? this.applicationRef;
    const response = host.switchToHttp().getResponse();
    // The guard set problem+json for Nest's own answer: a filter answering JSON says so.
    adapter?.setHeader(response, 'Content-Type', 'application/json');
    adapter?.reply(response, { custom: true, policy: exception.decision.policy }, 418);
  }
}
Catch(RateLimitException)(CustomRefusal);

/** A Nest app with SentinelModule and the global guard over `controller`, initialised. */
export async function createNestApp(
  platform: Platform,
  spec: Omit<AppSpec, 'routes'>,
  controller: new () => object,
): Promise<INestApplication> {
  const { trustProxy = true } = spec;
  class AppModule {}
  Module({
    imports: [SentinelModule.forRoot(spec.options)],
    controllers: [controller],
    providers: [{ provide: APP_GUARD, useClass: SentinelGuard }],
  })(AppModule);
  let app: INestApplication;
  if (platform === 'express') {
    const express = await NestFactory.create<NestExpressApplication>(
      AppModule,
      new ExpressAdapter(),
      { logger: false, abortOnError: false },
    );
    express.set('trust proxy', trustProxy);
    app = express;
  } else {
    // Fastify reads 'loopback' as proxy-addr's named range, as Express does.
    const adapter = new FastifyAdapter({ trustProxy: trustProxy as boolean });
    app = await NestFactory.create<NestFastifyApplication>(AppModule, adapter, {
      logger: false,
      abortOnError: false,
    });
  }
  if (spec.customHandler) app.useGlobalFilters(new CustomRefusal(app.getHttpAdapter()));
  await app.init();
  if (platform === 'fastify')
    await (app as NestFastifyApplication).getHttpAdapter().getInstance().ready();
  return app;
}

function driverFor(platform: Platform): AdapterDriver {
  async function build(spec: AppSpec): Promise<BuiltApp> {
    const app = await createNestApp(platform, spec, controllerOf(spec.routes ?? []));
    const server = app.getHttpServer();
    let listening = false;
    return {
      server,
      async listen() {
        listening = true;
        await app.listen(0, '127.0.0.1');
        return (await app.getUrl()).replace('[::1]', '127.0.0.1');
      },
      async close() {
        // Nest waits for open connections: a test's own sockets are dropped first.
        server.closeAllConnections?.();
        await app.close();
        if (!listening) server.close?.();
      },
    };
  }
  return {
    name: platform === 'express' ? 'nest-express' : 'nest-fastify',
    build,
    start: (spec) => build(spec).then(served),
  };
}

export const nestExpress = driverFor('express');
export const nestFastify = driverFor('fastify');

/**
 * A Nest app on Express with the module, the global guard and `routes`, each answering what
 * `answer` makes of the request: its server not yet listening, for supertest.
 */
export async function nestApp(
  options: AppSpec['options'],
  routes: readonly RouteSpec[],
  answer: (req: SentinelRequest) => unknown,
) {
  const app = await createNestApp('express', { options }, controllerOf(routes, answer));
  const server = app.getHttpServer() as Server;
  return {
    server,
    async close() {
      server.closeAllConnections();
      await app.close();
    },
  };
}
