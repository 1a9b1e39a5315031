// The Fastify version of the example API, built by a function so that each test can give it a
// store of its own, or Redis.
import { byApiKey, byIp, chain, type SentinelOptions, sentinel } from '@sentinel/fastify';
import Fastify from 'fastify';
import { EXPORTS, findApiKey, LOGIN, TIERS } from './policies.ts';

export interface AppOptions extends Pick<SentinelOptions, 'store' | 'redisUrl' | 'prefix'> {
  /** What the export route answers with, once its work is done. */
  exportRows?: () => Promise<unknown[]>;
}

export async function createApp({ exportRows = async () => [], ...stored }: AppOptions = {}) {
  const app = Fastify();
  await app.register(sentinel, {
    ...stored,
    tiers: TIERS,
    // A key its tenant was issued gets that tenant's tier; a key nobody issued gets a 401.
    identify: chain(byApiKey({ lookup: findApiKey, unknownKey: 'reject' }), byIp()),
  });
  app.post(
    '/login',
    { config: { rateLimit: { group: 'login', policies: LOGIN } } },
    (_req, reply) => reply.code(401).send({ error: 'wrong password' }),
  );
  app.get(
    '/export',
    { config: { rateLimit: { group: 'export', policies: EXPORTS } } },
    async () => ({
      rows: await exportRows(),
    }),
  );
  app.get('/hello', async (request) => ({
    tier: request.rateLimit?.tier,
    remaining: request.rateLimit?.remaining,
  }));
  return app;
}
