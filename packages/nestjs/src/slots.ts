// A WebSocket message's end, for the slots it holds: the interceptor ends it when the handler is done.

import {
  type CallHandler,
  type ExecutionContext,
  type NestInterceptor,
  UseInterceptors,
} from '@nestjs/common';
import type { NodeResponse } from '@sentinel/core/internal';
import { finalize, type Observable } from 'rxjs';

/**
 * Stands in for a response where a message has none: core releases the slots on its 'close'.
 * Nest hands the guard and the interceptors one array of a call's arguments, which keys it.
 */
export class HeldSlots implements NodeResponse {
  statusCode = 200;
  writableFinished = false;
  closed = false;
  readonly #listeners: Array<() => void> = [];

  once(_event: 'finish' | 'close', listener: () => void): this {
    this.#listeners.push(listener);
    return this;
  }

  end(): void {
    if (this.closed) return;
    this.closed = true;
    this.writableFinished = true;
    for (const listener of this.#listeners.splice(0)) listener();
  }
}

const held = new WeakMap<object, HeldSlots>();

export function holdSlots(args: object): HeldSlots {
  const slots = new HeldSlots();
  held.set(args, slots);
  return slots;
}

/**
 * Releases a WebSocket message's concurrency slots once its handler has answered, thrown or
 * completed its stream; it passes every other call through. The module binds it on the app's
 * gateways and resolvers (see bindToMessageHandlers).
 */
export class SlotInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const slots = held.get(context.getArgs());
    if (slots === undefined) return next.handle();
    return next.handle().pipe(finalize(() => slots.end()));
  }
}

/** @nestjs/websockets' GATEWAY_METADATA and @nestjs/graphql's RESOLVER_TYPE_METADATA. */
const HANDLES_MESSAGES = ['websockets:is_gateway', 'graphql:resolver_type'];

const bound = new WeakSet<object>();

/**
 * Binds the interceptor on every gateway and resolver class among `classes`, where a call may
 * have no HTTP response to end it (a socket.io message, a graphql-ws operation). Not for the whole
 * app: a global interceptor sends every HTTP route through Nest's interceptor pipeline, which
 * cost Nest on Fastify about 7 µs a request for nothing. An instance, not the class, since the
 * app's modules were scanned for injectables already; once per class, however many apps.
 */
export function bindToMessageHandlers(classes: Iterable<unknown>): void {
  const interceptor = new SlotInterceptor();
  for (const type of classes) {
    if (typeof type !== 'function' || bound.has(type)) continue;
    if (HANDLES_MESSAGES.some((key) => Reflect.hasOwnMetadata(key, type))) {
      UseInterceptors(interceptor)(type);
      bound.add(type);
    }
  }
}
