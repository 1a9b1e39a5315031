// A Nest app with socket.io gateways and SentinelModule, on Express or Fastify: the messages the WebSocket tests send.
import 'reflect-metadata';
import { type INestApplication, Module, UseGuards } from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import {
  ConnectedSocket,
  MessageBody,
  SubscribeMessage,
  WebSocketGateway,
} from '@nestjs/websockets';
import {
  RateLimit,
  SentinelGuard,
  SentinelModule,
  type SentinelModuleOptions,
  SkipRateLimit,
} from '@sentinel/nestjs';

export type Platform = 'express' | 'fastify';

/** Holds a message's handler until the test lets it go, or makes it throw. */
export const gates = new Map<string, (outcome: 'answer' | 'throw') => void>();
function gate(name: string): Promise<void> {
  return new Promise((resolve, reject) =>
    gates.set(name, (outcome) =>
      outcome === 'answer' ? resolve() : reject(new Error('the handler failed')),
    ),
  );
}

/** The socket.io client as a gateway handler sees it: its connection's id. */
interface SocketLike {
  id: string;
}

/** Limited by the module's options through the global guard, when the app binds it. */
@WebSocketGateway()
export class EchoGateway {
  @SubscribeMessage('echo')
  echo(@MessageBody() body: unknown, @ConnectedSocket() socket: SocketLike) {
    return { echoed: body, socket: socket.id };
  }

  @SubscribeMessage('ping')
  @SkipRateLimit()
  ping() {
    return 'pong';
  }

  @SubscribeMessage('search')
  @RateLimit({ group: 'search', limit: 2, window: '1m' })
  search(@MessageBody() body: unknown) {
    return { found: body };
  }

  @SubscribeMessage('held')
  async held(@MessageBody() name: string) {
    await gate(name);
    return { released: name };
  }
}

/** Limited by its own @UseGuards, whether or not the app binds the guard globally. */
@WebSocketGateway({ namespace: 'guarded' })
@UseGuards(SentinelGuard)
export class GuardedGateway {
  @SubscribeMessage('echo')
  echo(@MessageBody() body: unknown) {
    return { echoed: body };
  }
}

export interface WsAppOptions {
  platform: Platform;
  options: SentinelModuleOptions;
  /** Binds SentinelGuard for every handler with APP_GUARD. @default true */
  global?: boolean;
}

export function wsModule({ options, global = true }: Omit<WsAppOptions, 'platform'>) {
  @Module({
    imports: [SentinelModule.forRoot(options)],
    providers: [
      EchoGateway,
      GuardedGateway,
      ...(global ? [{ provide: APP_GUARD, useClass: SentinelGuard }] : []),
    ],
  })
  class WsAppModule {}
  return WsAppModule;
}

/** The app, listening on a free port of 127.0.0.1; socket.io is Nest's default WebSocket adapter. */
export async function createWsApp({ platform, ...rest }: WsAppOptions): Promise<INestApplication> {
  const adapter = platform === 'express' ? new ExpressAdapter() : new FastifyAdapter();
  const app = await NestFactory.create(wsModule(rest), adapter, { logger: false });
  await app.listen(0, '127.0.0.1');
  return app;
}
