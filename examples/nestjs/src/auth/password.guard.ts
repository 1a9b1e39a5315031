// The login's credential check, as passport's local strategy does it: a handler guard, so it runs after Sentinel's.
import {
  type CanActivate,
  type ExecutionContext,
  Injectable,
  UnauthorizedException,
} from '@nestjs/common';
import type { SentinelRequest } from '@sentinel/nestjs';
import { UsersService } from './users.service.js';

@Injectable()
export class PasswordGuard implements CanActivate {
  constructor(private readonly users: UsersService) {}

  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<SentinelRequest>();
    const { account, password } = (req.body ?? {}) as { account?: unknown; password?: unknown };
    const user = this.users.verify(account, password);
    if (user === null) throw new UnauthorizedException('Wrong account or password');
    req.user = user;
    return true;
  }
}
