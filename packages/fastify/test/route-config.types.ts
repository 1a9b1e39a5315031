// Type-level checks, run by `tsc --build`: route config, decorators and options are typed.
import type { Decision } from '@sentinel/core';
import Fastify, {
  type FastifyReply,
  type FastifyRequest,
  type RouteShorthandOptions,
} from 'fastify';
import sentinelDefault, { byApiKey, type RouteRateLimitOptions, sentinel } from '../src/index.ts';

const app = Fastify();
await app.register(sentinelDefault, { limit: 10, window: '1m' });
await app.register(sentinel, {
  tiers: { FREE: { limit: 10, window: '1m' } },
  identify: byApiKey({ lookup: async (key) => ({ tenant: key, tier: 'FREE' }) }),
  skip: (request) => request.routeOptions.url === '/health',
  cost: (request: FastifyRequest) => (request.method === 'POST' ? 5 : 1),
  hook: 'preHandler',
  global: false,
  handler: (_request, reply, decision: Decision) => {
    reply.send({ policy: decision.policy });
  },
});

// @ts-expect-error: only the request hooks the plugin knows
await app.register(sentinel, { limit: 1, window: '1m', hook: 'onSend' });

const search: RouteRateLimitOptions = { group: 'search', cost: 2 };
app.get('/search', { config: { rateLimit: search } }, async () => ({}));
app.get('/off', { config: { rateLimit: false } }, async () => ({}));
// Inline route options infer Fastify's ContextConfig generic, which lets `true` through there;
// declared route options are checked against the augmented FastifyContextConfig.
// @ts-expect-error: true is not a route option; omit it or pass an object
const bad: RouteShorthandOptions = { config: { rateLimit: true } };
app.get('/bad', bad, async () => ({}));
const off: RouteShorthandOptions = { config: { rateLimit: false } };
app.get('/off-declared', off, async () => ({}));
// @ts-expect-error: the cost is a number or a function of the request
app.get('/bad-cost', { config: { rateLimit: { cost: 'high' } } }, async () => ({}));

app.get<{ Querystring: { q: string } }>(
  '/typed',
  { onRequest: app.rateLimit({ limit: 5, window: '1s' }), preHandler: [app.rateLimit()] },
  async (request) => {
    const decision: Decision | undefined = request.rateLimit;
    const remaining: number | undefined = request.rateLimit?.remaining;
    const config: RouteRateLimitOptions | false | undefined = request.routeOptions.config.rateLimit;
    return { q: request.query.q, decision, remaining, config };
  },
);

app.addHook('onSend', async (request: FastifyRequest, _reply: FastifyReply, payload) => {
  // @ts-expect-error: the decision is read-only data, not a number
  const wrong: number = request.rateLimit;
  return wrong === 0 ? payload : payload;
});
