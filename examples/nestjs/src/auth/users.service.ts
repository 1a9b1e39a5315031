// Stands in for your users and sessions: two accounts, and a token per sign-in.
import { randomUUID } from 'node:crypto';
import { Injectable } from '@nestjs/common';

export interface User {
  id: string;
}

const PASSWORDS: Record<string, string> = {
  alice: 'correct horse battery staple',
  bob: 'hunter2 hunter2',
};

@Injectable()
export class UsersService {
  readonly #sessions = new Map<string, User>();

  /** The user whose password this is, or null. */
  verify(account: unknown, password: unknown): User | null {
    if (typeof account !== 'string' || !Object.hasOwn(PASSWORDS, account)) return null;
    return PASSWORDS[account] === password ? { id: account } : null;
  }

  signIn(user: User): string {
    const token = randomUUID();
    this.#sessions.set(token, user);
    return token;
  }

  userOf(token: string): User | undefined {
    return this.#sessions.get(token);
  }
}
