// Express 5 and 4 apps, served on real sockets for this package's tests; the conformance driver builds on them.
import { createServer, type RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';
import createExpress5, { type Express, type RequestHandler, type Router } from 'express';
import createExpress4 from 'express4';

export interface ExpressVersion {
  name: string;
  app(): Express;
  router(): Router;
}

export const express5: ExpressVersion = {
  name: 'express 5',
  app: () => createExpress5(),
  router: () => createExpress5.Router(),
};

/**
 * Typed as Express 5: in a user's project `express` resolves to the major installed, so types
 * match there; here the two type packages differ, and the runtime is what's tested.
 */
export const express4: ExpressVersion = {
  name: 'express 4',
  app: () => createExpress4() as unknown as Express,
  router: () => createExpress4.Router() as unknown as Router,
};

export const EXPRESS_VERSIONS: readonly ExpressVersion[] = [express5, express4];

/** What every test route answers: the decision the middleware exposed to it, or null. */
export const answer: RequestHandler = function answer(req, res) {
  res.json({ ok: true, rateLimit: req.rateLimit ?? null });
};

export interface Served {
  url: string;
  close(): Promise<void>;
}

/** Listens on a free port of 127.0.0.1; close() also drops kept-alive connections. */
export async function serve(app: RequestListener): Promise<Served> {
  const server = createServer(app);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}

/** Builds an app of `version` with `build` and serves it; its close joins `cleanups`. */
export async function startApp(
  version: ExpressVersion,
  build: (app: Express) => void,
  cleanups: Array<() => unknown>,
): Promise<string> {
  const app = version.app();
  build(app);
  const served = await serve(app);
  cleanups.push(() => served.close());
  return served.url;
}
