// A verdict as a fetch API Response, and the end of an admitted request's response, which releases what it holds.
import { EventEmitter } from 'node:events';
import type { NodeResponse } from './refund-by-outcome.ts';
import type { Verdict } from './verdict.ts';

/** Sentinel's own answer to a refused request: its status, headers and problem+json body. */
export function refusalResponse(verdict: Extract<Verdict, { action: 'respond' }>): Response {
  const headers = new Headers(verdict.headers);
  headers.set('Content-Type', 'application/problem+json');
  return new Response(JSON.stringify(verdict.body), { status: verdict.status, headers });
}

/**
 * `response` with `headers` added. Headers of a Response from `fetch()` or `Response.redirect()`
 * cannot be changed: that one is copied, body and all, without reading the body.
 */
export function withHeaders(response: Response, headers: Record<string, string>): Response {
  const names = Object.keys(headers);
  if (names.length === 0) return response;
  try {
    for (const name of names) response.headers.set(name, headers[name] as string);
    return response;
  } catch {
    const copy = new Response(response.body, response);
    for (const name of names) copy.headers.set(name, headers[name] as string);
    return copy;
  }
}

/**
 * An admitted request's response, ended as Node reports a response's end, for what follows it
 * (concurrency slots, refunds by outcome): 'finish' once its body was read to the end, 'close'
 * after that, or once the client went away first (its request's `signal` aborted), or once the
 * handler threw. Listeners added after the end hear it too, a microtask later.
 */
export class ResponseEnd extends EventEmitter implements NodeResponse {
  statusCode = 500;
  writableFinished = false;
  closed = false;
  readonly #signal: AbortSignal | undefined;
  readonly #left = () => this.end(false);

  constructor(signal?: AbortSignal) {
    super();
    this.#signal = signal;
    if (signal?.aborted) this.end(false);
    else signal?.addEventListener('abort', this.#left, { once: true });
  }

  override once(event: 'finish' | 'close', listener: () => void): this {
    if (!this.closed) return super.once(event, listener);
    if (event === 'close' || this.writableFinished) queueMicrotask(listener);
    return this;
  }

  end(finished: boolean): void {
    if (this.closed) return;
    this.#signal?.removeEventListener('abort', this.#left);
    this.writableFinished = finished;
    this.closed = true;
    if (finished) this.emit('finish');
    this.emit('close');
  }

  /**
   * `response`, with a body that ends this when it has been read in full (the runtime sent it)
   * or cancelled (the client left, or the runtime gave up on it). One without a body ends it at
   * once.
   */
  watch(response: Response): Response {
    this.statusCode = response.status;
    const body = response.body;
    if (body === null || this.closed) {
      // A client that left already gets nothing; the body is let go rather than left locked.
      if (body !== null) body.cancel().catch(() => {});
      else this.end(true);
      return response;
    }
    const reader = body.getReader();
    const watched = new ReadableStream<Uint8Array>(
      {
        pull: async (controller) => {
          try {
            const { done, value } = await reader.read();
            if (done) {
              controller.close();
              this.end(true);
            } else controller.enqueue(value);
          } catch (error) {
            // The handler's stream failed: the client gets a truncated body, and the slot returns.
            controller.error(error);
            this.end(false);
          }
        },
        cancel: (reason) => {
          this.end(false);
          return reader.cancel(reason);
        },
      },
      { highWaterMark: 0 },
    );
    return new Response(watched, response);
  }
}
