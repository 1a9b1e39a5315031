// The Fastify app under load: a tiny JSON answer behind the variant's limiter, if any.
import fastifyRateLimit from '@fastify/rate-limit';
import { sentinel } from '@sentinel/fastify';
import Fastify, { type FastifyInstance } from 'fastify';
import { connect, createFloor } from './redis-clients.ts';
import { headersByHand, sentinelOptions } from './sentinel-options.ts';
import { HUGE_LIMIT, type Running, type Variant, WINDOW_MS } from './variants.ts';

/** Registers the variant's limiter; what closes the clients the app does not close itself. */
async function limit(
  app: FastifyInstance,
  variant: Variant,
  redisUrl: string,
): Promise<() => Promise<unknown>> {
  switch (variant) {
    case 'bare':
      return async () => {};
    case 'floor': {
      const floor = await createFloor(redisUrl);
      app.addHook('onRequest', async function floorHook(request) {
        await floor.call(request);
      });
      return floor.close;
    }
    case 'bare-headers': {
      const headers = headersByHand();
      app.addHook('onRequest', async function headersHook(_request, reply) {
        for (const [name, value] of headers()) reply.header(name, value);
      });
      return async () => {};
    }
    case 'sentinel':
    case 'sentinel-by-key':
    case 'sentinel-own-client':
    case 'sentinel-leases': {
      // Its limiter closes with the app; a client the app made is the app's to close.
      const { options, close } = sentinelOptions(variant, redisUrl);
      await app.register(sentinel, options);
      return close;
    }
    case '@fastify/rate-limit': {
      const redis = await connect(redisUrl);
      await app.register(fastifyRateLimit, { redis, max: HUGE_LIMIT, timeWindow: WINDOW_MS });
      return () => redis.quit();
    }
    default:
      throw new TypeError(`Fastify has no variant ${variant}`);
  }
}

export async function serveFastify(variant: Variant, redisUrl: string): Promise<Running> {
  const app = Fastify();
  const closeClients = await limit(app, variant, redisUrl);
  app.get('/', async () => ({ ok: true }));
  await app.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.address();
  if (typeof address !== 'object' || !address) throw new Error('Fastify is not listening');
  return {
    port: address.port,
    async close() {
      await app.close();
      await closeClients();
    },
  };
}
