// Concurrency slots through withRateLimit on a real socket (@hono/node-server): held while a response streams, given back once it is sent, its client left, or the handler threw.
import { describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/harness/wait-for.ts';
import { type HttpBindings, serve } from '../../hono/test/apps.ts';
import { gate, rest, statusOf } from '../../hono/test/responses.ts';
import { closeLater, STORES, storeOptions } from '../../hono/test/stores.ts';
import { withRateLimit } from '../src/index.ts';

/** A body that sends 'first;', waits for `between`, then sends 'last' or fails. */
function twoChunks(between: Promise<void>, state: { cancelled: boolean }, fail = false) {
  const encoder = new TextEncoder();
  let sent = 0;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (sent++ === 0) return controller.enqueue(encoder.encode('first;'));
      await between;
      if (fail) return controller.error(new Error('the source failed'));
      controller.enqueue(encoder.encode('last'));
      controller.close();
    },
    cancel() {
      state.cancelled = true;
    },
  });
}

describe.each(STORES)('with the %s store', (store) => {
  /**
   * A handler of one slot, served on a socket: `/stream` streams two chunks around `between`,
   * `/fails` fails after the first, `/hangs` answers only after `between`, `/throws` throws, `/`
   * answers at once.
   */
  async function start(between: Promise<void>) {
    const state = { cancelled: false, reached: 0 };
    const handler = closeLater(
      withRateLimit(
        async (request: Request, _bindings: HttpBindings) => {
          state.reached++;
          const path = new URL(request.url).pathname;
          if (path === '/throws') throw new Error('handler failed');
          if (path === '/hangs') await between;
          if (path === '/stream' || path === '/fails') {
            return new Response(twoChunks(between, state, path === '/fails'));
          }
          return new Response('ok');
        },
        { concurrency: 1, ...storeOptions(store, 'fetch') },
      ),
    );
    const { url } = closeLater(await serve(handler));
    return { url, state };
  }

  it('holds the slot while the body streams, and gives it back once sent in full', async () => {
    const between = gate();
    const { url, state } = await start(between.opened);
    const response = await fetch(`${url}/stream`);
    expect(response.status).toBe(200);
    expect(response.headers.get('ratelimit')).toBe('"1-in-flight";r=0');
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    // Half sent: the slot is still the stream's.
    const meanwhile = await fetch(url);
    expect(meanwhile.status).toBe(429);
    expect(await meanwhile.json()).toMatchObject({ reason: 'concurrency' });
    between.open();
    expect(await rest(reader)).toBe('last');
    expect(state.cancelled).toBe(false);
    // Typically back within a few ms of the last byte.
    await waitFor(async () => (await statusOf(url)) === 200, 5_000, 'the slot to come back');
  });

  it('gives the slot back when the client leaves mid-stream, and cancels the body', async () => {
    const between = gate();
    const { url, state } = await start(between.opened);
    const leaving = new AbortController();
    const response = await fetch(`${url}/stream`, { signal: leaving.signal });
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    expect(await statusOf(url)).toBe(429);
    leaving.abort();
    await expect(reader.read()).rejects.toThrow();
    await waitFor(async () => (await statusOf(url)) === 200, 5_000, 'the slot to come back');
    await waitFor(() => state.cancelled, 5_000, 'the body to be cancelled');
    between.open();
  });

  it('gives the slot back when the client leaves before the handler answers', async () => {
    const between = gate();
    const { url, state } = await start(between.opened);
    const leaving = new AbortController();
    const left = fetch(`${url}/hangs`, { signal: leaving.signal }).catch(() => 'left');
    await waitFor(() => state.reached === 1, 5_000, 'the handler to have the request');
    expect(await statusOf(url)).toBe(429);
    leaving.abort();
    expect(await left).toBe('left');
    // The handler still waits, yet the slot is back once the client has gone.
    await waitFor(async () => (await statusOf(url)) === 200, 5_000, 'the slot to come back');
    between.open();
  });

  it('gives the slot back when the handler throws', async () => {
    const { url } = await start(gate().opened);
    expect(await statusOf(`${url}/throws`)).toBe(500);
    await waitFor(async () => (await statusOf(url)) === 200, 5_000, 'the slot to come back');
  });

  it("gives the slot back when the handler's body fails mid-way", async () => {
    const between = gate();
    const { url } = await start(between.opened);
    const response = await fetch(`${url}/fails`);
    expect(response.status).toBe(200);
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    expect(await statusOf(url)).toBe(429);
    between.open();
    // The client gets a truncated body.
    await expect(rest(reader)).rejects.toThrow();
    await waitFor(async () => (await statusOf(url)) === 200, 5_000, 'the slot to come back');
  });
});
