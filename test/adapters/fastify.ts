// The Fastify driver of the conformance suite: the plugin at the root, per-route options in config.

import { sentinel } from '../../packages/fastify/src/index.ts';
import { Fastify, type FastifyRequest } from '../../packages/fastify/test/framework.ts';
import type { AdapterDriver, RouteBody } from './driver.ts';

async function answer(request: FastifyRequest): Promise<RouteBody> {
  return { ok: true, rateLimit: request.rateLimit ?? null };
}

export const driver: AdapterDriver = {
  name: 'fastify',
  async start(spec) {
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
    const url = await app.listen({ host: '127.0.0.1', port: 0 });
    return { url, close: () => app.close() };
  },
};
