// `ban` in every adapter: after N refusals within the window, a 403 problem instead of a 429, counted in the store all gateways share.
import { Redis } from 'ioredis';
import { expect, it } from 'vitest';
import { QUOTA_EXCEEDED } from '../../packages/core/src/index.ts';
import { uniquePrefix } from '../harness/clients.ts';
import { ownServer, waitFor } from '../harness/own-redis.ts';
import { REDIS_TIMEOUT_MS, useStore } from './adapters.ts';
import { eachAdapter, type OutcomeOptions, startOutcomeApp, statuses } from './outcome-apps.ts';

const BANNED = 'urn:sentinel:problem:banned';
const POLICY = { limit: 2, window: '1h' } as const;
const identify = () => ({ key: 'mallory' });

/** Counts each status among `seen`. */
function tally(seen: readonly number[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const status of seen) counts[status] = (counts[status] ?? 0) + 1;
  return counts;
}

eachAdapter((driver, storeName) => {
  const start = (options: Partial<OutcomeOptions>) => {
    const store = useStore(storeName);
    return startOutcomeApp(driver, {
      options: { ...store.options, ...POLICY, identify, ...options },
    });
  };

  it('answers the limit, then `ban` 429s, then 403 with a problem body and the RateLimit headers', async () => {
    const app = await start({ ban: 2 });
    expect(await statuses(app, 4)).toEqual([200, 200, 429, 429]);
    const banned = await app.get();
    expect(banned.status).toBe(403);
    expect(banned.headers.get('content-type')).toMatch(/^application\/problem\+json\b/);
    expect(banned.body).toEqual({
      type: BANNED,
      title: 'Forbidden',
      status: 403,
      detail: expect.stringContaining('after 2 refusals within 1h'),
      'violated-policies': ['2-per-1h'],
    });
    expect(banned.headers.get('ratelimit')).toMatch(/^"2-per-1h";r=0;t=\d+$/);
    expect(banned.headers.get('ratelimit-policy')).toBe('"2-per-1h";q=2;w=3600');
    expect(banned.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
    expect(await statuses(app, 3)).toEqual([403, 403, 403]);
    expect(app.room.handled).toBe(2);
  });

  it('with ban: 0, answers 403 from the first refusal', async () => {
    const app = await start({ ban: 0 });
    expect(await statuses(app, 4)).toEqual([200, 200, 403, 403]);
  });

  it('keeps the 429 body when ban is off', async () => {
    const app = await start({});
    const replies = [];
    for (let i = 0; i < 8; i++) replies.push(await app.get());
    expect(replies.map((r) => r.status)).toEqual([200, 200, 429, 429, 429, 429, 429, 429]);
    expect(replies[7]?.body).toMatchObject({ type: QUOTA_EXCEEDED });
  });

  it('counts exactly `ban` 429s among 60 concurrent requests', async () => {
    const app = await start({ limit: 5, ban: 3 });
    const seen = await Promise.all(Array.from({ length: 60 }, () => app.get()));
    expect(tally(seen.map((r) => r.status))).toEqual({ 200: 5, 429: 3, 403: 52 });
  });

  it('bans only in the route whose options ask for it', async () => {
    const app = await start({});
    const store = useStore(storeName);
    const login = await startOutcomeApp(driver, {
      options: { ...store.options, ...POLICY, identify },
      login: { ban: 1, group: 'login' },
    });
    expect(await statuses(login, 5, '/login')).toEqual([200, 200, 429, 403, 403]);
    expect(await statuses(login, 4)).toEqual([200, 200, 429, 429]);
    expect(app.room.handled).toBe(0);
  });

  it('never bans in shadow mode, which refuses nothing', async () => {
    const app = await start({ ban: 0, mode: 'shadow' });
    expect(await statuses(app, 4)).toEqual([200, 200, 200, 200]);
  });
});

eachAdapter(
  (driver) => {
    it('shares the refusals between two gateways on one Redis', async () => {
      const store = useStore('redis');
      const options = { ...store.options, ...POLICY, identify, ban: 2 };
      const one = await startOutcomeApp(driver, { options });
      const two = await startOutcomeApp(driver, { options });
      const seen = [];
      for (let i = 0; i < 6; i++) seen.push((await (i % 2 ? two : one).get()).status);
      expect(seen).toEqual([200, 200, 429, 429, 403, 403]);
    });

    it('from redisUrl, uses one Redis client for the limits and the ban, and closes it', async () => {
      const server = await ownServer();
      const probe = new Redis(server.url);
      const clients = async () =>
        ((await probe.client('LIST')) as string).trim().split('\n').length - 1;
      try {
        const prefix = uniquePrefix('ban');
        const app = await startOutcomeApp(driver, {
          options: {
            redisUrl: server.url,
            timeout: REDIS_TIMEOUT_MS,
            prefix,
            ...POLICY,
            identify,
            ban: 1,
          },
        });
        expect(await statuses(app, 4)).toEqual([200, 200, 429, 403]);
        expect(await clients()).toBe(1);
        // The refusals are counted in that Redis, beside the limits.
        expect(await probe.keys(`${prefix}:ban:*`)).toHaveLength(1);
        await app.close();
        await waitFor(async () => (await clients()) === 0, 10_000, 'the client to close');
      } finally {
        probe.disconnect();
      }
    });
  },
  ['redis'],
);
