// The root module: SentinelModule with three tiers picked by API key, and the two global guards in the order they run.
import { Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { byApiKey, byIp, chain, SentinelGuard, SentinelModule } from '@sentinel/nestjs';
import { AccountController } from './account.controller.js';
import { AuthController } from './auth/auth.controller.js';
import { SessionGuard } from './auth/session.guard.js';
import { UsersService } from './auth/users.service.js';
import { ItemsController } from './items.controller.js';

// Stands in for your database of issued keys; only its answers are cached, never the raw keys.
const API_KEYS: Record<string, { tenant: string; tier: string }> = {
  'free-key': { tenant: 'acme', tier: 'FREE' },
  'pro-key': { tenant: 'globex', tier: 'PRO' },
  'enterprise-key': { tenant: 'initech', tier: 'ENTERPRISE' },
};

@Module({
  imports: [
    SentinelModule.forRoot({
      // With REDIS_URL the limits hold across every instance; without it each process counts
      // alone, in memory. Sentinel builds the client, and closes it when the app closes.
      redisUrl: process.env.REDIS_URL,
      tiers: {
        FREE: { name: 'free-minute', limit: 10, window: '1m' },
        PRO: [
          { name: 'pro-minute', limit: 100, window: '1m' },
          { name: 'pro-burst', limit: 20, window: '1s', algorithm: 'gcra' },
        ],
        ENTERPRISE: { name: 'enterprise-minute', limit: 1000, window: '1m' },
      },
      // A known x-api-key selects its tenant's tier; no key means FREE by client IP; a bad key
      // gets a 401. Bearer tokens are this app's sessions, not API keys: `bearer: false`.
      identify: chain(
        byApiKey({
          lookup: async (key) => API_KEYS[key] ?? null,
          unknownKey: 'reject',
          bearer: false,
        }),
        byIp(),
      ),
    }),
  ],
  controllers: [ItemsController, AuthController, AccountController],
  providers: [
    UsersService,
    // Global guards run in the order they are registered: the session first, so that Sentinel,
    // second, sees req.user. Controller and handler guards (the login's password check) run after
    // both.
    { provide: APP_GUARD, useClass: SessionGuard },
    { provide: APP_GUARD, useClass: SentinelGuard },
  ],
})
export class AppModule {}
