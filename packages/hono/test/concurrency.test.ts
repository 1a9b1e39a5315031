// Concurrency slots through the Hono middleware on a real socket: held while a response streams, given back once it is sent, its client left, or its handler threw.
import { describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/harness/wait-for.ts';
import { type RateLimitVariables, rateLimit } from '../src/index.ts';
import { Hono, serve, stream, streamSSE } from './apps.ts';
import { gate, rest, statusOf } from './responses.ts';
import { closeLater, STORES, storeOptions } from './stores.ts';

type Env = { Variables: RateLimitVariables };

/** The three ways a Hono handler streams, each writing 'first', waiting on `between`, then 'last'. */
const STREAMS = {
  "Hono's stream()": (between: Promise<void>, state: { aborted: boolean }) => (c: never) =>
    stream(c, async (s) => {
      s.onAbort(() => {
        state.aborted = true;
      });
      await s.write('first;');
      await between;
      await s.write('last');
    }),
  "Hono's streamSSE()": (between: Promise<void>, state: { aborted: boolean }) => (c: never) =>
    streamSSE(c, async (s) => {
      s.onAbort(() => {
        state.aborted = true;
      });
      await s.writeSSE({ data: 'first;' });
      await between;
      await s.writeSSE({ data: 'last' });
    }),
  'a raw ReadableStream': (between: Promise<void>, state: { aborted: boolean }) => () => {
    const encoder = new TextEncoder();
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (sent++ === 0) return controller.enqueue(encoder.encode('first;'));
        await between;
        controller.enqueue(encoder.encode('last'));
        controller.close();
      },
      cancel() {
        state.aborted = true;
      },
    });
    return new Response(body, { headers: { 'content-type': 'text/plain' } });
  },
} as const;

describe.each(STORES)('with the %s store', (store) => {
  /** An app of one slot: `/stream` streams as given, `/throws` throws, `/` answers at once. */
  async function start(streaming: (c: never) => Response | Promise<Response>) {
    const app = new Hono<Env>();
    app.use(closeLater(rateLimit({ concurrency: 1, ...storeOptions(store) })));
    app.get('/stream', streaming as never);
    app.get('/throws', () => {
      throw new Error('handler failed');
    });
    app.get('/', (c) => c.text('ok'));
    return closeLater(await serve(app.fetch)).url;
  }

  describe.each(Object.keys(STREAMS) as (keyof typeof STREAMS)[])('a response from %s', (kind) => {
    it('holds its slot while it streams, and gives it back once sent in full', async () => {
      const between = gate();
      const state = { aborted: false };
      const url = await start(STREAMS[kind](between.opened, state));
      const response = await fetch(`${url}/stream`);
      expect(response.status).toBe(200);
      expect(response.headers.get('ratelimit-policy')).toBe(
        '"1-in-flight";q=1;qu="concurrent-requests"',
      );
      const reader = (response.body as ReadableStream<Uint8Array>).getReader();
      const first = await reader.read();
      expect(new TextDecoder().decode(first.value)).toContain('first;');
      // Half sent: the slot is still the stream's.
      const meanwhile = await fetch(url);
      expect(meanwhile.status).toBe(429);
      expect(await meanwhile.json()).toMatchObject({ reason: 'concurrency' });
      between.open();
      expect(await rest(reader)).toContain('last');
      expect(state.aborted).toBe(false);
      // Typically back within a few ms of the last byte.
      await waitFor(async () => (await statusOf(url)) === 200, 5_000, 'the slot to come back');
    });

    it('gives its slot back when the client leaves mid-stream', async () => {
      const between = gate();
      const state = { aborted: false };
      const url = await start(STREAMS[kind](between.opened, state));
      const leaving = new AbortController();
      const response = await fetch(`${url}/stream`, { signal: leaving.signal });
      const reader = (response.body as ReadableStream<Uint8Array>).getReader();
      await reader.read();
      expect(await statusOf(url)).toBe(429);
      leaving.abort();
      await expect(reader.read()).rejects.toThrow();
      // The handler still waits to write its last chunk, yet the slot is back.
      await waitFor(async () => (await statusOf(url)) === 200, 5_000, 'the slot to come back');
      // And the stream heard that its client left.
      await waitFor(() => state.aborted, 5_000, 'the stream to be cancelled');
      between.open();
    });
  });

  it('gives the slot back when the handler throws', async () => {
    const url = await start(() => new Response('unused'));
    expect(await statusOf(`${url}/throws`)).toBe(500);
    await waitFor(async () => (await statusOf(url)) === 200, 5_000, 'the slot to come back');
  });

  it("gives the slot back when the handler's stream fails mid-way", async () => {
    const between = gate();
    const url = await start(() => {
      let sent = 0;
      const body = new ReadableStream<Uint8Array>({
        async pull(controller) {
          if (sent++ === 0) return controller.enqueue(new TextEncoder().encode('first;'));
          await between.opened;
          controller.error(new Error('the source failed'));
        },
      });
      return new Response(body);
    });
    const response = await fetch(`${url}/stream`);
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
