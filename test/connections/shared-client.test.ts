// Many limiters on one client of each library: one subscription to its events whatever their
// number, so Node warns of no leak, and every limiter still hears the client come back.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLimiter, type Limiter } from '../../packages/core/src/index.ts';
import { LIBRARIES, type LibraryName, NODE_REDIS, open } from '../harness/client-libraries.ts';
import { uniquePrefix } from '../harness/clients.ts';
import { type RedisProcess, startRedis } from '../harness/redis-server.ts';
import { waitFor } from '../harness/wait-for.ts';

/** More than Node's ten listeners to one event, the count it warns of a leak past. */
const LIMITERS = 12;
/**
 * Far longer than the test waits: a limiter whose breaker opened decides on Redis again soon
 * after the restart only because it heard the client come back.
 */
const COOLDOWN_MS = 60_000;

/** The events a library's client tells of a connection by. */
const eventsOf = (library: LibraryName): string[] =>
  (NODE_REDIS as readonly string[]).includes(library) ? ['ready', 'connect'] : ['ready'];

interface Emitter {
  listenerCount(event: string): number;
}

const warnings: Error[] = [];
const onWarning = (warning: Error) => void warnings.push(warning);
beforeAll(() => void process.on('warning', onWarning));
afterAll(() => void process.off('warning', onWarning));

describe.each(LIBRARIES)('%s', (library) => {
  let server: RedisProcess;
  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(() => server?.stop());

  it(`${LIMITERS} limiters on one client subscribe once, warn of no leak, and each probes Redis at once when it is back`, async () => {
    const client = await open(library, server.url);
    const emitter = client as unknown as Emitter;
    const events = eventsOf(library);
    const before = events.map((event) => emitter.listenerCount(event));
    const limiters: Limiter[] = Array.from({ length: LIMITERS }, () =>
      createLimiter({
        redis: client,
        prefix: uniquePrefix('shared'),
        limit: 1_000_000,
        window: '1h',
        breaker: { failures: 1, cooldownMs: COOLDOWN_MS },
        // The probe must not miss its deadline on a loaded machine: one failure reopens the
        // breaker for the whole cool-down.
        timeout: 1_000,
        onError: () => {},
      }),
    );
    for (const limiter of limiters) {
      expect((await limiter.consume('tenant')).degraded).toBeUndefined();
    }
    expect(events.map((event) => emitter.listenerCount(event))).toEqual(before.map((n) => n + 1));

    // Down: each limiter's breaker opens on its first failure, for the whole cool-down.
    await server.stop();
    for (const limiter of limiters) {
      await waitFor(async () => (await limiter.consume('tenant')).degraded === 'allow');
    }
    await server.restart();
    for (const limiter of limiters) {
      await waitFor(
        async () => (await limiter.consume('tenant')).degraded === undefined,
        10_000,
        'the limiter to decide on Redis again',
      );
    }

    await Promise.all(limiters.map((limiter) => limiter.close()));
    expect(events.map((event) => emitter.listenerCount(event))).toEqual(before);
    // Node emits the warning on the next tick.
    await new Promise((resolve) => setImmediate(resolve));
    expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
  });
});
