// The NestJS version of the example API, a module whose forRoot takes where its limits are counted,
// so that each test can give it a store of its own, or Redis.
import 'reflect-metadata';
import {
  Controller,
  type DynamicModule,
  Get,
  Injectable,
  Module,
  Post,
  UnauthorizedException,
} from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import {
  byApiKey,
  byIp,
  chain,
  type Decision,
  RateLimit,
  RateLimitDecision,
  SentinelGuard,
  SentinelModule,
  type SentinelModuleOptions,
} from '@sentinel/nestjs';
import { EXPORTS, findApiKey, LOGIN, TIERS } from './policies.ts';

export type AppOptions = Pick<SentinelModuleOptions, 'store' | 'redisUrl' | 'prefix'>;

/** Builds the rows of an export: the slow work a test replaces with overrideProvider. */
@Injectable()
export class ExportService {
  async exportRows(): Promise<unknown[]> {
    return [];
  }
}

@Controller()
export class ApiController {
  constructor(private readonly exports: ExportService) {}

  @Get('hello')
  hello(@RateLimitDecision() decision?: Decision) {
    return { tier: decision?.tier, remaining: decision?.remaining };
  }

  // Routes with limits of their own: their policies replace the tiers, in a budget of their own.
  @Post('login')
  @RateLimit({ group: 'login', policies: LOGIN })
  login(): never {
    throw new UnauthorizedException({ error: 'wrong password' });
  }

  @Get('export')
  @RateLimit({ group: 'export', policies: EXPORTS })
  async export() {
    return { rows: await this.exports.exportRows() };
  }
}

@Module({
  controllers: [ApiController],
  // The guard limits every route: by the module's tiers, or by a handler's own @RateLimit().
  providers: [ExportService, { provide: APP_GUARD, useClass: SentinelGuard }],
})
// biome-ignore lint/complexity/noStaticOnlyClass: a Nest module configured by a static forRoot.
export class AppModule {
  /** The app, counting in `store`, or in Redis with `redisUrl`: main.ts passes process.env's. */
  static forRoot(stored: AppOptions = {}): DynamicModule {
    return {
      module: AppModule,
      imports: [
        SentinelModule.forRoot({
          ...stored,
          tiers: TIERS,
          // A key its tenant was issued gets that tenant's tier; a key nobody issued gets a 401.
          identify: chain(byApiKey({ lookup: findApiKey, unknownKey: 'reject' }), byIp()),
        }),
      ],
    };
  }
}
