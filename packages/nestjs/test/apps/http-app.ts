// A Nest app on Express or Fastify with SentinelModule: the routes the HTTP tests drive, and the options each test gives.
import 'reflect-metadata';
import {
  type CanActivate,
  Controller,
  type ExecutionContext,
  Get,
  type INestApplication,
  Inject,
  Injectable,
  Module,
  Post,
  Req,
  UnauthorizedException,
  UseGuards,
} from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import {
  type Decision,
  RateLimit,
  RateLimitDecision,
  SentinelGuard,
  SentinelModule,
  type SentinelModuleOptions,
  type SentinelRequest,
  SentinelService,
  SkipRateLimit,
} from '@sentinel/nestjs';

export type Platform = 'express' | 'fastify';

/** What each route answers: the decision the guard left on the request. */
function answer(req: SentinelRequest) {
  return { ok: true, rateLimit: req.rateLimit ?? null };
}

/** Waits for what a test lets go of, so that a request stays in flight as long as the test needs. */
export const gates = new Map<string, () => void>();
function gate(name: string): Promise<void> {
  return new Promise((resolve) => gates.set(name, resolve));
}

/** Sets req.user from `Authorization: User <id>`, and refuses any other credential with 401. */
@Injectable()
export class UserGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<SentinelRequest>();
    const match = /^User (\w+)$/.exec(String(req.headers.authorization ?? ''));
    if (!match) throw new UnauthorizedException();
    req.user = { id: match[1] };
    return true;
  }
}

@Controller()
export class ItemsController {
  constructor(private readonly sentinel: SentinelService) {}

  @Get()
  root(@Req() req: SentinelRequest) {
    return answer(req);
  }

  @Get('search')
  @RateLimit({ group: 'search', limit: 3, window: '1m' })
  search(@Req() req: SentinelRequest) {
    return answer(req);
  }

  @Get('heavy')
  @RateLimit({ cost: 2 })
  heavy(@Req() req: SentinelRequest) {
    return answer(req);
  }

  @Get('health')
  @SkipRateLimit()
  health(@Req() req: SentinelRequest) {
    return answer(req);
  }

  @Get('decision')
  decision(@RateLimitDecision() decision?: Decision) {
    return { remaining: decision?.remaining ?? null };
  }

  @Get('boom')
  boom(): never {
    throw new Error('the handler failed');
  }

  @Get('held/:name')
  async held(@Req() req: SentinelRequest) {
    await gate(String((req.params as { name: string }).name));
    return answer(req);
  }

  /** What the service exposes: the module's limiter and the groups. */
  @Get('limiters')
  @SkipRateLimit()
  limiters() {
    return { groups: [...this.sentinel.groups.keys()], hasLimiter: Boolean(this.sentinel.limiter) };
  }
}

@Controller('internal')
@SkipRateLimit()
export class InternalController {
  @Get('free')
  free(@Req() req: SentinelRequest) {
    return answer(req);
  }

  @Get('counted')
  @SkipRateLimit(false)
  counted(@Req() req: SentinelRequest) {
    return answer(req);
  }
}

/** Limited per user: the user guard runs first, then Sentinel with the user it found. */
@Controller('account')
@UseGuards(UserGuard, SentinelGuard)
@RateLimit({ identify: (req) => ({ key: `user:${req.user.id}` }), limit: 2, window: '1m' })
export class AccountController {
  @Get()
  account(@Req() req: SentinelRequest) {
    return answer(req);
  }
}

/** Limited only where the guard is bound, for apps without the global guard. */
@Controller('quotes')
export class QuotesController {
  @Get('open')
  open(@Req() req: SentinelRequest) {
    return answer(req);
  }

  @Get('limited')
  @UseGuards(SentinelGuard)
  limited(@Req() req: SentinelRequest) {
    return answer(req);
  }
}

/** Refuses a wrong password with 401, as an auth guard does: it runs after the global guards. */
@Injectable()
export class PasswordGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<SentinelRequest>();
    if (req.headers['x-password'] !== 'right') throw new UnauthorizedException();
    return true;
  }
}

/** A login: counted per client IP by the global guard before its auth guard can refuse it. */
@Controller('login')
export class LoginController {
  @Post()
  @UseGuards(PasswordGuard)
  @RateLimit({ name: 'login', limit: 3, window: '15m' })
  login(@Req() req: SentinelRequest) {
    return answer(req);
  }
}

export interface HttpAppOptions {
  platform: Platform;
  options: SentinelModuleOptions;
  /** Binds SentinelGuard for every route with APP_GUARD. @default true */
  global?: boolean;
}

export function httpModule({ options, global = true }: Omit<HttpAppOptions, 'platform'>) {
  @Module({
    imports: [SentinelModule.forRoot(options)],
    controllers: [
      ItemsController,
      InternalController,
      AccountController,
      QuotesController,
      LoginController,
    ],
    providers: global ? [{ provide: APP_GUARD, useClass: SentinelGuard }] : [],
  })
  class HttpAppModule {}
  return HttpAppModule;
}

/** The app, initialised and not yet listening; trusts one proxy hop, so tests choose the client IP. */
export async function createHttpApp({
  platform,
  ...rest
}: HttpAppOptions): Promise<INestApplication> {
  const module = httpModule(rest);
  if (platform === 'express') {
    const app = await NestFactory.create<NestExpressApplication>(module, new ExpressAdapter(), {
      logger: false,
      abortOnError: false,
    });
    app.set('trust proxy', true);
    return app.init();
  }
  const app = await NestFactory.create<NestFastifyApplication>(
    module,
    new FastifyAdapter({ trustProxy: true }),
    { logger: false, abortOnError: false },
  );
  await app.init();
  await app.getHttpAdapter().getInstance().ready();
  return app;
}

/** The limits a config module would hold, injected into forRootAsync's factory. */
export const LIMITS = 'LIMITS';

@Module({
  providers: [{ provide: LIMITS, useValue: { limit: 4 } }],
  exports: [LIMITS],
})
export class LimitsModule {}

@Controller('async')
export class AsyncController {
  constructor(@Inject(LIMITS) private readonly limits: { limit: number }) {}

  @Get()
  root(@Req() req: SentinelRequest) {
    return { ...answer(req), configured: this.limits.limit };
  }
}

@Module({
  imports: [
    SentinelModule.forRootAsync({
      imports: [LimitsModule],
      inject: [LIMITS],
      useFactory: async (limits: { limit: number }) => ({ limit: limits.limit, window: '1m' }),
    }),
    LimitsModule,
  ],
  controllers: [AsyncController],
  providers: [{ provide: APP_GUARD, useClass: SentinelGuard }],
})
export class AsyncAppModule {}

@Controller('bad')
export class BadRouteController {
  @Get()
  @RateLimit({ limit: -1, window: '1m' })
  bad() {
    return { ok: true };
  }
}

/** A route whose limit cannot be: the app must not start. */
@Module({
  imports: [SentinelModule.forRoot({ limit: 10, window: '1m' })],
  controllers: [BadRouteController],
})
export class BadRouteModule {}

/** Creates and initialises `module` on a platform, as createHttpApp does. */
export async function createApp(platform: Platform, module: object): Promise<INestApplication> {
  const app =
    platform === 'express'
      ? await NestFactory.create(module, new ExpressAdapter(), {
          logger: false,
          abortOnError: false,
        })
      : await NestFactory.create(module, new FastifyAdapter(), {
          logger: false,
          abortOnError: false,
        });
  await app.init();
  if (platform === 'fastify')
    await (app as NestFastifyApplication).getHttpAdapter().getInstance().ready();
  return app;
}
