// Serves a fetch handler on whichever runtime runs this file: Bun.serve, Deno.serve, or Node through @hono/node-server.
import { serve as serveOnNode } from '@hono/node-server';

type FetchHandler = (request: Request, ...rest: never[]) => Response | Promise<Response>;

declare const Bun:
  | { serve(options: { port: number; fetch: FetchHandler }): { port: number } }
  | undefined;
declare const Deno:
  | {
      serve(
        options: { port: number; onListen(address: { port: number }): void },
        handler: FetchHandler,
      ): unknown;
    }
  | undefined;

/** Serves `fetch` on `port` (0 for any free one); resolves once it listens. */
export async function serve(
  fetch: FetchHandler,
  port: number,
): Promise<{ runtime: string; port: number }> {
  if (typeof Bun !== 'undefined') {
    return { runtime: 'Bun', port: Bun.serve({ port, fetch }).port };
  }
  if (typeof Deno !== 'undefined') {
    const { serve: serveOnDeno } = Deno;
    return new Promise((resolve) => {
      serveOnDeno({ port, onListen: (address) => resolve({ runtime: 'Deno', ...address }) }, fetch);
    });
  }
  const onNode = fetch as Parameters<typeof serveOnNode>[0]['fetch'];
  return new Promise((resolve) => {
    serveOnNode({ fetch: onNode, port }, (address) =>
      resolve({ runtime: `Node ${process.version}`, port: address.port }),
    );
  });
}
