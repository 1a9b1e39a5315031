// The Express app under load: a tiny JSON answer behind the variant's limiter, if any.
import type { Server } from 'node:http';
import { rateLimit as sentinel } from '@sentinel/express';
import express, { type RequestHandler } from 'express';
import { rateLimit as expressRateLimit } from 'express-rate-limit';
import { type RedisReply, RedisStore } from 'rate-limit-redis';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { connect, createFloor } from './redis-clients.ts';
import { headersByHand, sentinelMiddleware } from './sentinel-options.ts';
import { HUGE_LIMIT, type Running, type Variant, WINDOW_MS } from './variants.ts';

/** The limiter middleware of a variant, and what closes the resources it holds. */
async function limiterOf(
  variant: Variant,
  redisUrl: string,
): Promise<{ use?: RequestHandler; close(): Promise<unknown> }> {
  switch (variant) {
    case 'bare':
      return { close: async () => {} };
    case 'floor': {
      const floor = await createFloor(redisUrl);
      const use: RequestHandler = (req, _res, next) => {
        floor.call(req).then(() => next(), next);
      };
      return { use, close: floor.close };
    }
    case 'sentinel':
    case 'sentinel-by-key':
    case 'sentinel-own-client':
    case 'sentinel-leases': {
      return sentinelMiddleware(variant, redisUrl, sentinel);
    }
    case 'bare-headers': {
      const headers = headersByHand();
      const use: RequestHandler = (_req, res, next) => {
        for (const [name, value] of headers()) res.setHeader(name, value);
        next();
      };
      return { use, close: async () => {} };
    }
    case 'express-rate-limit': {
      const client = await connect(redisUrl);
      const store = new RedisStore({
        sendCommand: (command: string, ...args: string[]) =>
          client.call(command, ...args) as Promise<RedisReply>,
      });
      return {
        use: expressRateLimit({ windowMs: WINDOW_MS, limit: HUGE_LIMIT, store }),
        close: () => client.quit(),
      };
    }
    case 'rate-limiter-flexible': {
      const client = await connect(redisUrl);
      const limiter = new RateLimiterRedis({
        storeClient: client,
        points: HUGE_LIMIT,
        duration: WINDOW_MS / 1000,
      });
      // The middleware its README gives for Express.
      const use: RequestHandler = (req, res, next) => {
        limiter.consume(req.ip as string).then(
          () => next(),
          () => void res.status(429).send('Too Many Requests'),
        );
      };
      return { use, close: () => client.quit() };
    }
    default:
      throw new TypeError(`Express has no variant ${variant}`);
  }
}

export async function serveExpress(variant: Variant, redisUrl: string): Promise<Running> {
  const limiter = await limiterOf(variant, redisUrl);
  const app = express();
  if (limiter.use) app.use(limiter.use);
  app.get('/', (_req, res) => {
    res.json({ ok: true });
  });
  const server = await new Promise<Server>((resolve) => {
    const listening = app.listen(0, '127.0.0.1', () => resolve(listening));
  });
  const address = server.address();
  if (typeof address !== 'object' || !address) throw new Error('Express is not listening');
  return {
    port: address.port,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await limiter.close();
    },
  };
}
