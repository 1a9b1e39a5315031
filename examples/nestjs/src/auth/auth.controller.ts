// POST /login: five failed attempts per client IP every 15 minutes, counted before the password is checked.
import { Controller, HttpCode, Post, Req, UseGuards } from '@nestjs/common';
import { byIp, RateLimit, type SentinelRequest } from '@sentinel/nestjs';
import { PasswordGuard } from './password.guard.js';
import { Public } from './public.decorator.js';
import { UsersService } from './users.service.js';

@Controller()
export class AuthController {
  constructor(private readonly users: UsersService) {}

  /**
   * The global SentinelGuard counts the attempt by IP before PasswordGuard, a handler guard, can
   * refuse it: every guess counts, and a successful login is given back once it has answered.
   */
  @Post('login')
  @HttpCode(200)
  @Public()
  @RateLimit({
    group: 'login',
    identify: byIp(),
    limit: 5,
    window: '15m',
    algorithm: 'fixed-window',
    skipSuccessfulRequests: true,
  })
  @UseGuards(PasswordGuard)
  login(@Req() req: SentinelRequest) {
    return { token: this.users.signIn(req.user) };
  }
}
