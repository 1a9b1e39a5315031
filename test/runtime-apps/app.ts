// A Hono app or a wrapped fetch handler (APP=hono|fetch) with one concurrent request per tenant, on
// whichever runtime runs this file (Node, Bun, Deno), on Redis (REDIS_URL, PREFIX). Prints
// `{ port }` on stdout once it listens; exits when stdin closes.
import { byHeader } from '@sentinel/core';
import { decisionOf, withRateLimit } from '@sentinel/fetch';
import { type RateLimitVariables, rateLimit } from '@sentinel/hono';
import { Hono } from 'hono';
import { Redis } from 'ioredis';

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 1,
  autoResendUnfulfilledCommands: false,
});
redis.on('error', () => {});
await new Promise((resolve) => redis.once('ready', resolve));

const options = {
  redis,
  prefix: process.env.PREFIX ?? 'runtime-apps',
  // A deadline far past any wait of a loaded machine: the subject here is when slots go back.
  timeout: 2_000,
  concurrency: 1,
  identify: byHeader('x-tenant-id', { trusted: true }),
};

/** 20 chunks, 50 ms apart: a second of streaming. */
function slowBody(): ReadableStream<Uint8Array> {
  let sent = 0;
  return new ReadableStream({
    async pull(controller) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      controller.enqueue(new TextEncoder().encode(`chunk ${sent}\n`));
      if (++sent === 20) controller.close();
    },
  });
}

/** Handlers of `/hang` that have started, for `/hanging`: the test probes only once one holds its slot. */
let hanging = 0;

/** What each path does once admitted. */
async function answer(path: string, remaining: number | undefined): Promise<Response> {
  if (path === '/stream') return new Response(slowBody());
  if (path === '/hang') {
    hanging++;
    return new Promise<Response>(() => {});
  }
  if (path === '/throws') throw new Error('the handler failed');
  return Response.json({ remaining });
}

function honoApp(): (request: Request, ...rest: unknown[]) => Response | Promise<Response> {
  const app = new Hono<{ Variables: RateLimitVariables }>();
  app.use(rateLimit(options));
  app.get('*', (c) => answer(c.req.path, c.get('rateLimit')?.remaining));
  return (request, ...rest) => app.fetch(request, rest[0]);
}

function fetchApp(): (request: Request, ...rest: unknown[]) => Promise<Response> {
  const handler = withRateLimit(
    (request: Request, ..._rest: unknown[]) =>
      answer(new URL(request.url).pathname, decisionOf(request)?.remaining),
    options,
  );
  // A handler's throw is the runtime's to answer; this one answers 500, as Hono does.
  return (request, ...rest) =>
    handler(request, ...rest).catch(() => new Response('failed', { status: 500 }));
}

const limited = process.env.APP === 'fetch' ? fetchApp() : honoApp();
/** `/hanging` is answered beside the limits: how many `/hang` handlers have started. */
const fetch = (request: Request, ...rest: unknown[]) =>
  new URL(request.url).pathname === '/hanging'
    ? Response.json({ hanging })
    : limited(request, ...rest);
const runtime = globalThis as {
  Bun?: { serve(options: object): { port: number } };
  Deno?: { serve(options: object, handler: typeof fetch): { addr: { port: number } } };
};
let port: number;
if (runtime.Bun) port = runtime.Bun.serve({ hostname: '127.0.0.1', port: 0, fetch }).port;
else if (runtime.Deno) {
  port = runtime.Deno.serve({ hostname: '127.0.0.1', port: 0, onListen() {} }, fetch).addr.port;
} else {
  const { createAdaptorServer } = await import('@hono/node-server');
  const server = createAdaptorServer({ fetch: fetch as never });
  port = await new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)),
  );
}
process.stdin
  .on('end', () => process.exit(0))
  .on('close', () => process.exit(0))
  .resume();
process.stdout.write(`${JSON.stringify({ port })}\n`);
