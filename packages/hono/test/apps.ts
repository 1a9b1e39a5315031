// Hono and its Node server, resolved from this package (the root does not depend on them), for this package's tests, the fetch wrapper's and the conformance driver.
import type { Server } from 'node:http';
import { createAdaptorServer } from '@hono/node-server';
import { closeServer, listen } from '../../../test/adapters/server.ts';

export { createAdaptorServer, type HttpBindings } from '@hono/node-server';
export { getConnInfo } from '@hono/node-server/conninfo';
export type { Context } from 'hono';
export { Hono } from 'hono';
export { stream, streamSSE } from 'hono/streaming';

export interface Served {
  /** Such as http://127.0.0.1:PORT. */
  url: string;
  close(): Promise<void>;
}

/**
 * Serves a fetch API handler (a Hono app's `app.fetch`, or a wrapped handler) on 127.0.0.1 and
 * a port the OS picks, through @hono/node-server as a Node app runs it. close() also drops the
 * connections still open.
 */
export async function serve(
  fetch: (request: Request, bindings: never) => Response | Promise<Response>,
): Promise<Served> {
  const server = createAdaptorServer({ fetch: fetch as never }) as Server;
  const url = await listen(server);
  return { url, close: () => closeServer(server) };
}
