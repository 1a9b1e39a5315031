// A driver's http.Server on a real socket when a test asks for one, and its closing after the test.
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Listens `server` on 127.0.0.1 and a port the OS picks; resolves with its base URL. */
export function listen(server: Server): Promise<string> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      const { port } = server.address() as AddressInfo;
      resolve(`http://127.0.0.1:${port}`);
    });
  });
}

/**
 * Closes `server` if it still listens (a test served it, or supertest was mid-request when the
 * test ended), dropping its connections so that no handle outlives the test.
 */
export function closeServer(server: Server): Promise<void> {
  if (!server.listening) return Promise.resolve();
  return new Promise((resolve, reject) => {
    server.close((error) => (error ? reject(error) : resolve()));
    server.closeAllConnections();
  });
}
