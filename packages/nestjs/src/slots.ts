// A WebSocket message's end, for the slots it holds: the interceptor ends it when the handler is done.

import type { CallHandler, ExecutionContext, NestInterceptor } from '@nestjs/common';
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
 * completed its stream. The module binds it for the app; it passes every other call through.
 */
export class SlotInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const slots = held.get(context.getArgs());
    if (slots === undefined) return next.handle();
    return next.handle().pipe(finalize(() => slots.end()));
  }
}
