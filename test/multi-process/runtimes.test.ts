// Mixed fleets on one Redis: the Hono middleware and the fetch wrapper on Node, Bun and Deno, beside Express and Fastify, race 2000 requests for one tenant and admit exactly the limit.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  answeringAtOnce,
  awayFromWindowEdge,
  type Fleet,
  freshTenant,
  type GatewaySpec,
  race,
  startGateways,
} from '../../examples/race-demo/fleet.ts';
import { ALGORITHMS } from '../../packages/core/src/index.ts';
import { connect, uniquePrefix } from '../harness/clients.ts';
import { type RedisProcess, startRedis } from '../harness/redis-server.ts';
import { runtimeBinary } from '../harness/runtimes.ts';

const REQUESTS = 2000;
const LIMIT = 100;
const HOUR_MS = 3_600_000;

const bun = () => ({ name: 'bun' as const, binary: runtimeBinary('bun') });
const deno = () => ({ name: 'deno' as const, binary: runtimeBinary('deno') });

/** Each fleet's gateways, by adapter and runtime: every runtime the adapter serves requests on. */
const FLEETS: Array<{
  name: string;
  gateways: () => Array<Omit<GatewaySpec, 'redisUrl' | 'prefix'>>;
}> = [
  {
    name: 'Hono on Node, Bun and Deno, and Express',
    gateways: () => [
      { adapter: 'hono' },
      { adapter: 'hono', runtime: bun() },
      { adapter: 'hono', runtime: deno() },
      { adapter: 'express' },
    ],
  },
  {
    name: 'the fetch wrapper on Node, Bun and Deno, and Fastify',
    gateways: () => [
      { adapter: 'fetch' },
      { adapter: 'fetch', runtime: bun() },
      { adapter: 'fetch', runtime: deno() },
      { adapter: 'fastify' },
    ],
  },
];

describe.each(FLEETS)('a fleet of $name on one Redis', ({ name, gateways }) => {
  const prefix = uniquePrefix('runtimes');
  let server: RedisProcess | undefined;
  let fleet: Fleet | undefined;

  beforeAll(async () => {
    server = await startRedis();
    const redisUrl = server.url;
    fleet = await startGateways(gateways().map((spec) => ({ ...spec, redisUrl, prefix })));
  });
  afterAll(async () => {
    await fleet?.stop();
    await server?.stop();
  });

  it.each(ALGORITHMS)(
    `admits exactly 100 of 2000 concurrent requests spread over ${name} with %s`,
    async (algorithm) => {
      const gatewaysUp = (fleet as Fleet).gateways;
      if (algorithm === 'fixed-window') {
        await awayFromWindowEdge(connect('ioredis 6', (server as RedisProcess).url), HOUR_MS);
      }
      const result = await race(gatewaysUp, `/${algorithm}`, freshTenant(algorithm), REQUESTS);
      expect(
        { statuses: result.statuses, degraded: result.degraded },
        JSON.stringify(result),
      ).toEqual({
        statuses: { 200: LIMIT, 429: REQUESTS - LIMIT },
        degraded: 0,
      });
      // The runtimes were deciding at once: the count is shared, not held by one process.
      expect(answeringAtOnce(result), JSON.stringify(result)).toBeGreaterThan(1);
    },
  );
});
