// The plugin on the Redis store: shared budgets across apps and routes, and the client left open.

import { describe, expect, it } from 'vitest';
import { connect, uniquePrefix } from '../../../test/harness/clients.ts';
import { failOnError } from '../../../test/harness/store-errors.ts';
import { sentinel } from '../src/index.ts';
import { answer, app, statuses } from './apps.ts';

// Default options; any store error fails the test rather than degrading a decision.
const redisOptions = () => ({
  redis: connect(),
  prefix: uniquePrefix('fastify'),
  onError: failOnError,
});

describe('the plugin on Redis', () => {
  it('shares one budget between two apps on the same Redis, as two gateways would', async () => {
    const options = { ...redisOptions(), limit: 3, window: '1m' as const };
    const [first, second] = [app(), app()];
    for (const server of [first, second]) {
      await server.register(sentinel, options);
      server.get('/', answer);
    }
    expect(await statuses(first, '/', 2)).toEqual([200, 200]);
    expect(await statuses(second, '/', 2)).toEqual([200, 429]);
    // A token every 20 s on Redis's clock: the wait rounds up to 20 until a whole second passes.
    expect((await second.inject('/')).headers['retry-after']).toBe('20');
  });

  it('shares one budget between two routes of one group (issue 463)', async () => {
    const server = app();
    await server.register(sentinel, { ...redisOptions(), limit: 10, window: '1m' });
    const search = { group: 'search', limit: 2 };
    server.get('/search', { config: { rateLimit: search } }, answer);
    server.get('/suggest', { config: { rateLimit: { ...search } } }, answer);
    expect(await statuses(server, '/search', 1)).toEqual([200]);
    expect(await statuses(server, '/suggest', 2)).toEqual([200, 429]);
    expect(await statuses(server, '/search', 1)).toEqual([429]);
  });

  it('lets a route use a store of its own instead of the plugin one', async () => {
    const server = app();
    await server.register(sentinel, { limit: 1, window: '1m' });
    const { redis, prefix } = redisOptions();
    server.get('/shared', { config: { rateLimit: { redis, prefix } } }, answer);
    expect(await statuses(server, '/shared', 2)).toEqual([200, 429]);
    const keys = await redis.keys(`${prefix}:*`);
    expect(keys).toHaveLength(1);
  });

  it('leaves the Redis client it was given open after app.close()', async () => {
    const options = redisOptions();
    const server = app();
    await server.register(sentinel, { ...options, limit: 1, window: '1m' });
    server.get('/', answer);
    expect(await statuses(server, '/', 1)).toEqual([200]);
    await server.close();
    expect(await options.redis.ping()).toBe('PONG');
  });
});
