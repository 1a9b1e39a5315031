// The Koa majors the adapter supports, and a real HTTP server on a free port for an app.
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import Koa2 from 'koa2';

export { Koa };

export const KOA_VERSIONS = [
  ['Koa 3', Koa],
  ['Koa 2', Koa2],
] as const;

export interface Served {
  /** Such as http://127.0.0.1:PORT. */
  url: string;
  close(): Promise<void>;
}

/** Serves `app` on 127.0.0.1 and a port the OS picks. */
export function serve(app: Koa): Promise<Served> {
  return new Promise((resolve, reject) => {
    const server = app.listen(0, '127.0.0.1');
    server.once('error', reject);
    server.once('listening', () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `http://127.0.0.1:${port}`,
        close: () =>
          new Promise<void>((done, fail) => {
            server.close((error) => (error ? fail(error) : done()));
            server.closeAllConnections();
          }),
      });
    });
  });
}
