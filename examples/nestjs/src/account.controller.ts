// A signed-in user's account: limited per user, which Sentinel can count because the session guard ran first.
import { Controller, Get, Req } from '@nestjs/common';
import { RateLimit, type SentinelRequest } from '@sentinel/nestjs';

@Controller('account')
@RateLimit({
  group: 'account',
  // req.user is set by SessionGuard, the global guard registered before SentinelGuard.
  identify: (req) => ({ key: `user:${req.user.id}` }),
  limit: 3,
  window: '1m',
})
export class AccountController {
  @Get()
  account(@Req() req: SentinelRequest) {
    return { user: req.user.id, remaining: req.rateLimit?.remaining ?? null };
  }
}
