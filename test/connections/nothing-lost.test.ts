// Nothing is lost with the client redisUrl builds: calls that failed open never count late, nor are re-sent.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { describe, expect, it, vi } from 'vitest';
import { createLimiter, type SentinelError } from '../../packages/core/src/index.ts';
import { connect, uniquePrefix } from '../harness/clients.ts';
import { commandCalls, printedByUnheardClient } from '../harness/connection-checks.ts';
import { owned, ownServer } from '../harness/own-redis.ts';
import { waitFor } from '../harness/wait-for.ts';

/** A server of the test's own, and a limiter on the client Sentinel builds for its URL. */
async function limiterOnUrl() {
  const server = await ownServer();
  const prefix = uniquePrefix('lost');
  const errors: SentinelError[] = [];
  // No breaker: every call below must go to the store and meet the connection as it is.
  const limiter = createLimiter({
    redisUrl: server.url,
    prefix,
    limit: 5,
    window: '1d',
    breaker: false,
    onError: (error) => errors.push(error),
  });
  owned(limiter);
  // Connected, and the function library loaded.
  expect((await limiter.consume('warm-up')).degraded).toBeUndefined();
  const keyOf = (tenant: string) => `${prefix}:{${tenant}}:5-per-1d:token-bucket`;
  return { server, prefix, errors, limiter, keyOf };
}

describe('the client built from redisUrl', () => {
  it('never runs calls made while Redis was down, nor re-sends those in flight, after it restarts', async () => {
    const { server, prefix, errors, limiter } = await limiterOnUrl();
    // In flight as the server dies: each ran on the old server (whose data dies with it) or
    // failed; a re-send after the reconnect would recreate its key on the new one.
    const inFlight = Array.from({ length: 20 }, (_, i) => limiter.consume(`in-flight-${i}`));
    await server.stop();
    for (const decision of await Promise.all(inFlight)) expect(decision.allowed).toBe(true);
    // Let the client see the socket close.
    await sleep(100);
    errors.length = 0;
    for (let i = 0; i < 10; i++) {
      const started = performance.now();
      const decision = await limiter.consume(`while-down-${i}`);
      // At once: the deadline (50 ms) is not what answers.
      expect(performance.now() - started).toBeLessThan(50);
      expect(decision).toMatchObject({ allowed: true, degraded: 'allow' });
    }
    expect(errors.map((error) => error.code)).toEqual(Array(10).fill('STORE_UNAVAILABLE'));

    await server.restart();
    // The client reconnects by itself (its retry delay is at most 200 ms).
    await waitFor(
      async () => (await limiter.consume('probe')).degraded === undefined,
      5_000,
      'the limiter reaching Redis again',
    );
    // Time for anything queued or kept for re-sending to arrive.
    await sleep(500);
    const admin = connect('ioredis 6', server.url);
    expect(await admin.keys(`${prefix}:*`)).toEqual([`${prefix}:{probe}:5-per-1d:token-bucket`]);
  });

  // Fails on a core bug: createRedisClient attaches no 'error' listener, so ioredis prints an
  // "Unhandled error event" on every reconnect attempt (2 to 10 a second) while Redis is down,
  // although the limiter already reports failures through onError (or one process warning).
  it('keeps stderr quiet while Redis is down: failures go to onError only', async () => {
    const printed = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      const { server, errors, limiter } = await limiterOnUrl();
      await server.stop();
      await sleep(1_200);
      expect((await limiter.consume('tenant')).degraded).toBe('allow');
      expect(errors.map((error) => error.code)).toEqual(['STORE_UNAVAILABLE']);
      const unhandled = printed.mock.calls.filter((args) =>
        String(args[0]).includes('Unhandled error event'),
      );
      expect(unhandled).toHaveLength(0);
      // The spy would have caught them: a client without a listener is heard in the same time.
      const control = await printedByUnheardClient(printed, 1_200);
      expect(control.some((line) => line.includes('Unhandled error event'))).toBe(true);
    } finally {
      printed.mockRestore();
    }
  });

  // A paused (SIGSTOP) server keeps its sockets: the FCALL already sent sits in its receive
  // buffer, and Redis runs it once resumed. No client setting can take back bytes already sent,
  // so the call carries its expiry: run late, it does nothing. Nor is anything more sent: no
  // fallback and no re-send after the timeout.
  it('sends one call, which does nothing when run late, for a call that timed out on a paused Redis', async () => {
    const { server, errors, limiter, keyOf } = await limiterOnUrl();
    const admin: Redis = connect('ioredis 6', server.url);
    await admin.config('RESETSTAT');
    server.pause();
    const decision = await limiter.consume('paused');
    expect(decision).toMatchObject({ allowed: true, degraded: 'allow' });
    expect(errors.map((error) => error.code)).toEqual(['STORE_TIMEOUT']);
    server.resume();
    await waitFor(async () => (await admin.ping()) === 'PONG', 5_000, 'Redis answering');
    await sleep(300);
    expect({
      fcall: await commandCalls([admin], 'fcall'),
      evalsha: await commandCalls([admin], 'evalsha'),
      eval: await commandCalls([admin], 'eval'),
    }).toEqual({ fcall: 1, evalsha: 0, eval: 0 });
    // The one FCALL ran, past its expiry: the request was not counted.
    expect(await admin.exists(keyOf('paused'))).toBe(0);
    expect((await limiter.peek('paused')).remaining).toBe(5);
  });

  // test/failure-paused.test.ts checks the same of a late NOSCRIPT.
  it('does not answer a late missing function with a script once the call has timed out', async () => {
    const { server, errors, limiter, keyOf } = await limiterOnUrl();
    const admin: Redis = connect('ioredis 6', server.url);
    await admin.call('FUNCTION', 'FLUSH');
    await admin.script('FLUSH');
    await admin.config('RESETSTAT');
    server.pause();
    const decision = await limiter.consume('paused');
    expect(decision).toMatchObject({ allowed: true, degraded: 'allow' });
    expect(errors.map((error) => error.code)).toEqual(['STORE_TIMEOUT']);
    server.resume();
    await waitFor(async () => (await admin.ping()) === 'PONG', 5_000, 'Redis answering');
    await sleep(300);
    // The FCALL found no function after the caller had given up: nothing was sent again, and
    // nothing was consumed.
    expect({
      fcall: await commandCalls([admin], 'fcall'),
      evalsha: await commandCalls([admin], 'evalsha'),
      eval: await commandCalls([admin], 'eval'),
    }).toEqual({ fcall: 1, evalsha: 0, eval: 0 });
    expect(await admin.exists(keyOf('paused'))).toBe(0);
  });
});
