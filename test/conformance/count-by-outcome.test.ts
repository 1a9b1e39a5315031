// skipSuccessfulRequests, skipFailedRequests and requestWasSuccessful in every adapter: counted on arrival, given back after the response.
import { request } from 'node:http';
import { expect, it } from 'vitest';
import { type RequestLike, SentinelError } from '../../packages/core/src/index.ts';
import { uniquePrefix } from '../harness/clients.ts';
import { ownServer, RECOMMENDED, readyClient, waitFor } from '../harness/own-redis.ts';
import { REDIS_TIMEOUT_MS, useStore } from './adapters.ts';
import {
  eachAdapter,
  type OutcomeApp,
  type OutcomeDriver,
  type OutcomeOptions,
  remainingOf,
  startOutcomeApp,
  statuses,
} from './outcome-apps.ts';

/** One client, and an hour's window: no refill blurs the counts. */
const POLICY = { limit: 2, window: '1h' } as const;
const identify = () => ({ key: 'alice' });

/**
 * A GET whose client leaves once the route has it: the route waits (`x-hang`) until then, and
 * answers 200 after. Resolves once the server has seen the client go. On a real socket, which
 * the client destroys: leaving is the point.
 */
async function leaveEarly(app: OutcomeApp): Promise<void> {
  const { room } = app;
  const handled = room.handled;
  const left = room.left;
  const sent = request(`${await app.listen()}/`, { headers: { 'x-hang': '1' } });
  sent.on('error', () => {});
  sent.end();
  await waitFor(() => room.handled === handled + 1, 10_000, 'the route to have the request');
  sent.destroy();
  await waitFor(() => room.left === left + 1, 10_000, 'the server to see the client leave');
}

eachAdapter((driver, storeName) => {
  const start = (options: Partial<OutcomeOptions>, extra: { successIs?: number } = {}) => {
    const store = useStore(storeName);
    const remaining = remainingOf(store, { ...POLICY, limit: options.limit ?? POLICY.limit });
    return startOutcomeApp(driver, {
      options: { ...store.options, ...POLICY, identify, ...options },
      ...extra,
    }).then((app) => ({ app, remaining: () => remaining('alice') }));
  };

  it('with skipSuccessfulRequests, admits 10 successes at a limit of 2, and counts a failure', async () => {
    const { app, remaining } = await start({ skipSuccessfulRequests: true });
    expect(await statuses(app, 10)).toEqual(Array(10).fill(200));
    await waitFor(async () => (await remaining()) === 2);
    expect(await statuses(app, 2, '/', { 'x-status': '401' })).toEqual([401, 401]);
    expect(await statuses(app, 1)).toEqual([429]);
    expect(app.room.handled).toBe(12);
  });

  it('with skipFailedRequests, gives failures back and counts successes', async () => {
    const { app, remaining } = await start({ skipFailedRequests: true });
    expect(await statuses(app, 5, '/', { 'x-status': '500' })).toEqual(Array(5).fill(500));
    expect(await statuses(app, 3, '/', { 'x-status': '404' })).toEqual(Array(3).fill(404));
    await waitFor(async () => (await remaining()) === 2);
    expect(await statuses(app, 3)).toEqual([200, 200, 429]);
  });

  it('asks requestWasSuccessful, a promise, what a success is', async () => {
    const { app } = await start({ skipSuccessfulRequests: true }, { successIs: 201 });
    expect(await statuses(app, 6, '/', { 'x-status': '201' })).toEqual(Array(6).fill(201));
    // A 200 is no success by this rule: it counts.
    expect(await statuses(app, 3)).toEqual([200, 200, 429]);
  });

  it('with skipFailedRequests, gives back a request whose client left before the answer', async () => {
    const { app, remaining } = await start({ skipFailedRequests: true, limit: 1 });
    await leaveEarly(app);
    await waitFor(async () => (await remaining()) === 1);
    expect(await statuses(app, 2)).toEqual([200, 429]);
  });

  it('with skipSuccessfulRequests, counts a request whose client left, though the route then answers 200', async () => {
    const { app, remaining } = await start({ skipSuccessfulRequests: true, limit: 1 });
    await leaveEarly(app);
    expect(await remaining()).toBe(0);
    expect(await statuses(app, 1)).toEqual([429]);
  });

  it('gives back in shadow mode too, since shadow mode counts', async () => {
    const { app, remaining } = await start({ skipSuccessfulRequests: true, mode: 'shadow' });
    expect(await statuses(app, 4)).toEqual(Array(4).fill(200));
    await waitFor(async () => (await remaining()) === 2);
  });

  it('layers the options per route: /login gives successes back, / counts them', async () => {
    const store = useStore(storeName);
    const remaining = remainingOf(store, POLICY);
    const app = await startOutcomeApp(driver, {
      options: { ...store.options, ...POLICY, identify },
      login: { skipSuccessfulRequests: true, group: 'login' },
    });
    expect(await statuses(app, 5, '/login')).toEqual(Array(5).fill(200));
    expect(await statuses(app, 3)).toEqual([200, 200, 429]);
    expect(await remaining('alice')).toBe(0);
  });
});

/** Bad options, and the TypeError each gives. */
const BAD_OPTIONS: Array<[Partial<OutcomeOptions>, RegExp]> = [
  [
    { skipSuccessfulRequests: 'yes' as never },
    /`skipSuccessfulRequests` must be true or false, got 'yes'/,
  ],
  [{ skipFailedRequests: 1 as never }, /`skipFailedRequests` must be true or false, got 1/],
  [{ requestWasSuccessful: 200 } as never, /`requestWasSuccessful` must be a function, got 200/],
  [{ ban: -1 }, /`ban` must be a number of refusals, 0 or more, got -1/],
  [{ ban: 1.5 }, /`ban` must be a number of refusals, 0 or more, got 1.5/],
  [{ ban: '3' as never }, /`ban` must be a number of refusals, 0 or more, got '3'/],
];

eachAdapter(
  (driver: OutcomeDriver) => {
    it.each(BAD_OPTIONS)('refuses %o at construction, naming the option', async (bad, message) => {
      const options = { limit: 2, window: '1h', ...bad } as OutcomeOptions;
      await expect(startOutcomeApp(driver, { options })).rejects.toThrow(message);
      await expect(
        startOutcomeApp(driver, { options: { limit: 2, window: '1h' }, login: bad }),
      ).rejects.toThrow(message);
    });
  },
  ['memory'],
);

eachAdapter(
  (driver: OutcomeDriver) => {
    /** An app on a Redis server of the test's own, recording what reaches onError. */
    async function appOnOwnRedis(options: Partial<OutcomeOptions> = {}) {
      const server = await ownServer();
      const client = await readyClient(server, RECOMMENDED);
      const errors: Array<{ error: Error; probe: unknown }> = [];
      const app = await startOutcomeApp(driver, {
        options: {
          redis: client,
          timeout: REDIS_TIMEOUT_MS,
          prefix: uniquePrefix('outcome'),
          ...POLICY,
          identify,
          skipSuccessfulRequests: true,
          onError: (error: Error, req: RequestLike) =>
            errors.push({ error, probe: req.headers['x-probe'] }),
          ...options,
        },
      });
      return { server, client, app, errors };
    }

    /** A request the route holds until `answer()`: resolves once the route has it. */
    async function held(app: OutcomeApp) {
      const reply = app.get('/', { 'x-hold': '1', 'x-probe': 'held' });
      await waitFor(() => app.room.handled === 1, 10_000, 'the route to have the request');
      return {
        async answer() {
          const started = performance.now();
          app.room.release();
          const { status } = await reply;
          return { status, ms: performance.now() - started };
        },
      };
    }

    it('reports a refund that fails, with its request, after an answer it never delayed', async () => {
      const { server, client, app, errors } = await appOnOwnRedis();
      const request = await held(app);
      await server.stop();
      await waitFor(() => client.status !== 'ready');
      const { status, ms } = await request.answer();
      expect(status).toBe(200);
      // Typically a few ms.
      expect(ms).toBeLessThan(500);
      await waitFor(() => errors.length === 1, 10_000, 'the failed refund to be reported');
      expect(errors[0]?.error).toBeInstanceOf(SentinelError);
      expect(errors[0]?.probe).toBe('held');
    });

    it('answers at once while a refund waits on a Redis that does not answer', async () => {
      const { server, app, errors } = await appOnOwnRedis({ timeout: 1_000 });
      const request = await held(app);
      server.pause();
      const { status, ms } = await request.answer();
      expect(status).toBe(200);
      // Typically a few ms; the refund waits its whole 1 s timeout.
      expect(ms).toBeLessThan(500);
      expect(errors).toEqual([]);
      await waitFor(() => errors.length === 1, 10_000, 'the refund to time out');
      expect(errors[0]?.error).toMatchObject({ code: 'STORE_TIMEOUT' });
      expect(errors[0]?.probe).toBe('held');
    });
  },
  ['redis'],
);
