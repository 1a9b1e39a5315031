// GET and DELETE /_sentinel/identities/:key: an API key's quotas, and a reset of them, for the operator.
import type { FastifyInstance, FastifyReply } from 'fastify';
import { ADMIN_PREFIX, requireToken, UNLIMITED } from './admin-access.ts';
import { type QuotaInspector, StoreUnavailableError } from './quota-inspector.ts';

interface KeyParams {
  key: string;
}

/** Registers the admin routes, each behind the token. Answers name the key's tier, never the key. */
export function registerAdminRoutes(
  app: FastifyInstance,
  inspector: QuotaInspector,
  token: string,
): void {
  const route = { ...UNLIMITED, onRequest: requireToken(token) };
  const path = `${ADMIN_PREFIX}/identities/:key`;

  app.get<{ Params: KeyParams }>(path, route, async (request, reply) => {
    try {
      const quota = await inspector.quota(request.params.key);
      return quota ?? unknownKey(reply);
    } catch (error) {
      if (error instanceof StoreUnavailableError) return storeUnavailable(reply, error);
      throw error;
    }
  });

  app.delete<{ Params: KeyParams }>(path, route, async (request, reply) => {
    let found: boolean;
    try {
      found = await inspector.reset(request.params.key);
    } catch (error) {
      // The store's own message may name hosts; the log keeps it, the answer does not.
      request.log.warn({ err: error }, 'admin reset failed');
      return storeUnavailable(reply, new Error('the store did not answer: nothing was reset'));
    }
    return found ? reply.code(204).send() : unknownKey(reply);
  });
}

function unknownKey(reply: FastifyReply) {
  return reply.code(404).type('application/problem+json').send({
    type: 'about:blank',
    title: 'Not Found',
    status: 404,
    detail: 'No API key like this one was issued.',
  });
}

function storeUnavailable(reply: FastifyReply, error: Error) {
  return reply.code(503).type('application/problem+json').send({
    type: 'about:blank',
    title: 'Service Unavailable',
    status: 503,
    detail: error.message,
  });
}
