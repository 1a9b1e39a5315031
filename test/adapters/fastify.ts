// The Fastify driver of the conformance suite: the plugin at the root, per-route options in config.

import { sentinel } from '../../packages/fastify/src/index.ts';
import { Fastify, type FastifyRequest } from '../../packages/fastify/test/framework.ts';
import { type AdapterDriver, type RouteBody, served } from './driver.ts';

async function answer(request: FastifyRequest): Promise<RouteBody> {
  return { ok: true, rateLimit: request.rateLimit ?? null };
}

export const driver: AdapterDriver = {
  name: 'fastify',
  start: (spec) => driver.build(spec).then(served),
  async build(spec) {
    // All, none, or the addresses of trusted proxies: its typings pick one kind per call.
    const app = Fastify({ trustProxy: (spec.trustProxy ?? true) as boolean });
    await app.register(sentinel, {
      ...spec.options,
      ...(spec.customHandler && {
        handler: (_request, reply, decision) => {
          reply.code(418).send({ custom: true, policy: decision.policy });
        },
      }),
    });
    app.get('/', answer);
    for (const route of spec.routes ?? []) {
      const config = route.rateLimit === undefined ? {} : { rateLimit: route.rateLimit };
      const { work } = route;
      app.get(
        route.path,
        { config },
        work === undefined
          ? answer
          : async (request: FastifyRequest) => {
              await work();
              return answer(request);
            },
      );
    }
    await app.ready();
    return {
      server: app.server,
      listen: () => app.listen({ host: '127.0.0.1', port: 0 }),
      async close() {
        // Fastify drops the connections of a server it listened itself, not of one supertest did.
        app.server.closeAllConnections();
        await app.close();
      },
    };
  },
};
