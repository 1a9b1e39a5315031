// The upstream of the demo: answers every request with what reached it, after `?delay=<ms>` if asked.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface EchoUpstream {
  url: string;
  close(): Promise<void>;
}

/** The longest `?delay` honoured: enough to watch a graceful shutdown drain a request. */
const MAX_DELAY_MS = 30_000;

/** Listens on a free port of the loopback interface, out of reach of other machines. */
export async function startEchoUpstream(): Promise<EchoUpstream> {
  const server = createServer(function echo(req, res) {
    const url = new URL(req.url ?? '/', 'http://upstream');
    const delay = Math.min(Number(url.searchParams.get('delay')) || 0, MAX_DELAY_MS);
    let bytes = 0;
    req.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
    });
    req.on('end', () => {
      setTimeout(() => {
        res.setHeader('content-type', 'application/json');
        res.end(
          JSON.stringify({
            upstream: 'echo',
            method: req.method,
            path: req.url,
            tier: req.headers['x-sentinel-tier'] ?? null,
            bodyBytes: bytes,
          }),
        );
      }, delay);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}
