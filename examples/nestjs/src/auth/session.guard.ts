// A global guard: every route but the @Public() ones needs `Authorization: Bearer <token>`, and gets req.user.
import {
  type CanActivate,
  type ExecutionContext,
  Injectable,
  UnauthorizedException,
} from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { SentinelRequest } from '@sentinel/nestjs';
import { IS_PUBLIC } from './public.decorator.js';
import { UsersService } from './users.service.js';

@Injectable()
export class SessionGuard implements CanActivate {
  constructor(
    private readonly reflector: Reflector,
    private readonly users: UsersService,
  ) {}

  canActivate(context: ExecutionContext): boolean {
    const targets = [context.getHandler(), context.getClass()];
    if (this.reflector.getAllAndOverride<boolean>(IS_PUBLIC, targets)) return true;
    const req = context.switchToHttp().getRequest<SentinelRequest>();
    const token = /^Bearer (\S+)$/.exec(String(req.headers.authorization ?? ''))?.[1];
    const user = token === undefined ? undefined : this.users.userOf(token);
    if (user === undefined) throw new UnauthorizedException();
    req.user = user;
    return true;
  }
}
