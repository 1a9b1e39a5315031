// The gateway as a Fastify app: Sentinel admits a request, the proxy forwards it upstream.
import httpProxy from '@fastify/http-proxy';
import type { IoredisLikeClient } from '@sentinel/core';
import { prometheusMetrics } from '@sentinel/core/prometheus';
import {
  byApiKey,
  byIp,
  chain,
  createRedisClient,
  type Observer,
  sentinel,
} from '@sentinel/fastify';
import Fastify, { type FastifyInstance } from 'fastify';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { loggedUrl, UNLIMITED } from './admin-access.ts';
import { registerAdminRoutes } from './admin-routes.ts';
import { type GatewayConfig, isLoopback, type RouteRule } from './config.ts';
import { DecisionStats } from './decision-stats.ts';
import { KeyDirectory } from './key-directory.ts';
import { QuotaInspector } from './quota-inspector.ts';
import { registerStatusPage } from './status-page.ts';

export interface Gateway {
  app: FastifyInstance;
  /** Drains requests in flight, then closes the Redis client the gateway built. */
  close(): Promise<void>;
}

/** Where the gateway reads API keys, besides `Authorization: Bearer`. */
const API_KEY_HEADER = 'x-api-key';

/**
 * Builds and readies the app for an upstream; Sentinel's TypeErrors about `config.limiter` and
 * the routes' costs and groups surface here.
 */
export async function buildGateway(config: GatewayConfig & { upstream: string }): Promise<Gateway> {
  const { upstream } = config;
  const redis = config.redisUrl === undefined ? undefined : createRedisClient(config.redisUrl);
  const app = Fastify({
    logger: {
      level: config.logLevel,
      serializers: {
        // Fastify's own request line, with an admin route's API key left out.
        req: (request) => ({
          method: request.method,
          url: loggedUrl(request.url),
          host: request.headers.host,
          remoteAddress: request.socket?.remoteAddress,
          remotePort: request.socket?.remotePort,
        }),
      },
    },
  });
  try {
    const registry = new Registry();
    collectDefaultMetrics({ register: registry });
    const breakers = new Set<string>();
    const stats = config.statusPage ? new DecisionStats() : undefined;
    // One identifier for the request path and the admin routes, so both find the same identity.
    const directory = new KeyDirectory(config, (error) =>
      app.log.error({ err: error }, 'keys file not reloaded: the keys read last stay in force'),
    );
    const identifyApiKey = byApiKey({
      header: API_KEY_HEADER,
      // A key's tier or own policies change with the keys file, once its cached answer expires.
      lookup: async (key) => directory.get(key),
      unknownKey: 'reject',
      cacheTtlMs: config.keyCacheTtlMs,
    });

    const { timeout, ...limits } = config.limiter;
    await app.register(sentinel, {
      ...limits,
      // The deadline of a Redis call: without Redis, the limits are in memory, which never waits.
      ...(redis && timeout !== undefined && { timeout }),
      redis,
      // A known key selects its tenant's tier; no key means the default tier by client IP; a key
      // nobody issued gets a 401.
      identify: chain(identifyApiKey, byIp()),
      onLimited(request, decision) {
        // The request's logger carries its id; the decision says who without the raw key.
        request.log.debug(
          { tier: decision.tier, policy: decision.policy, retryAfterMs: decision.retryAfterMs },
          'rate limited',
        );
      },
      observe: [
        consumedOnly(prometheusMetrics(registry)),
        {
          breaker({ server, state }) {
            if (state === 'open') breakers.add(server);
            else breakers.delete(server);
          },
        },
        ...(stats ? [stats.observer] : []),
      ],
    });

    drainOnClose(app);
    app.get('/healthz', UNLIMITED, async () => ({ status: 'ok' }));
    app.get('/readyz', UNLIMITED, async (_request, reply) => {
      const store = redis ? redis.status : 'memory';
      const breakerOpen = breakers.size > 0;
      const ready = storeServes(config, redis, breakerOpen);
      return reply.code(ready ? 200 : 503).send({
        status: ready ? 'ready' : 'not ready',
        redis: store,
        breakerOpen,
        onStoreError: config.limiter.onStoreError ?? 'allow',
      });
    });
    app.get('/metrics', UNLIMITED, async (_request, reply) =>
      reply.type(registry.contentType).send(await registry.metrics()),
    );

    if (config.adminToken !== undefined || stats) {
      const inspector = new QuotaInspector({
        limiters: app.sentinel,
        tierNames: Object.keys(config.limiter.tiers ?? {}),
        identifyApiKey,
      });
      if (config.adminToken !== undefined) registerAdminRoutes(app, inspector, config.adminToken);
      if (stats) {
        // Open on loopback, where only this machine reaches it; behind the token elsewhere.
        const token = isLoopback(config.host) ? undefined : config.adminToken;
        registerStatusPage(app, { stats, inspector, token });
      }
    }

    // Each configured prefix is a proxy of its own, so that its route carries its own cost and
    // group; `/` takes everything else at the default cost.
    const routes: RouteRule[] = config.routes.some((route) => route.path === '/')
      ? config.routes
      : [...config.routes, { path: '/' }];
    for (const [i, { path, ...limits }] of routes.entries()) {
      const prefix = path === '/' ? '' : path;
      try {
        await app.register(httpProxy, {
          upstream,
          prefix,
          rewritePrefix: prefix,
          // Without a cost or group of its own, a route counts against the app-wide limit.
          config: { rateLimit: Object.keys(limits).length > 0 ? limits : undefined },
          replyOptions: { rewriteRequestHeaders: forwardTier },
        });
      } catch (error) {
        // Sentinel names the option; which route it belongs to is the gateway's to say.
        if (error instanceof TypeError) error.message += ` (in routes[${i}])`;
        throw error;
      }
    }
    await app.ready();
  } catch (error) {
    await app.close().catch(() => {});
    redis?.disconnect();
    throw error;
  }
  return {
    app,
    async close() {
      await app.close();
      await redis?.quit().catch(() => redis.disconnect());
    },
  };
}

/**
 * The admin routes and the status page peek through the plugin's limiters, whose observers see
 * every decision: a peek is the operator looking, not traffic, so the metrics count consumes only.
 */
function consumedOnly(observer: Observer): Observer {
  const { decision } = observer;
  if (!decision) return observer;
  return {
    ...observer,
    decision(event) {
      if (event.consumed) decision.call(observer, event);
    },
  };
}

/**
 * Asks clients to hang up once the responses in flight at shutdown are sent. `app.close()` closes
 * the connections idle at that moment, but one that turns idle later would keep the process
 * until its client drops it.
 */
function drainOnClose(app: FastifyInstance): void {
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  app.addHook('onSend', async (_request, reply) => {
    if (closing) reply.header('connection', 'close');
  });
}

/**
 * Whether the gateway serves requests as its failure policy intends. Under `'deny'` a store out
 * of reach refuses every request with a 503, so the instance says it is not ready; under
 * `'allow'` and `'local'` it still serves, and taking every instance out of rotation because
 * Redis is down would turn a Redis outage into an API outage.
 */
function storeServes(
  config: GatewayConfig,
  redis: IoredisLikeClient | undefined,
  breakerOpen: boolean,
): boolean {
  if (config.limiter.onStoreError !== 'deny' || redis === undefined) return true;
  return redis.status === 'ready' && !breakerOpen;
}

/** Tells the upstream the tier Sentinel applied, replacing any value the client sent. */
function forwardTier(
  request: { rateLimit?: { tier?: string } | undefined },
  headers: Record<string, string | string[] | undefined>,
) {
  const { 'x-sentinel-tier': _, ...rest } = headers;
  const tier = request.rateLimit?.tier;
  return tier === undefined ? rest : { ...rest, 'x-sentinel-tier': tier };
}
