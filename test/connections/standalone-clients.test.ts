// Bring-your-own clients on one Redis: ioredis 5 and 6, iovalkey and node-redis 5 and 6 all limit alike.
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createLimiter,
  type LimiterOptions,
  type SentinelError,
} from '../../packages/core/src/index.ts';
import { LIBRARIES, type LibraryName, open } from '../harness/client-libraries.ts';
import { connect, uniquePrefix } from '../harness/clients.ts';
import {
  commandCalls,
  expectEveryAlgorithmAndMixedTier,
  expectFlushRecovery,
  expectQuotaLeasesExact,
  expressAnswers,
  STEADY,
} from '../harness/connection-checks.ts';
import { scriptsOnlyUrl } from '../harness/own-redis.ts';
import { type RedisProcess, startRedis } from '../harness/redis-server.ts';

// A server of this file's own: SCRIPT FLUSH and CONFIG RESETSTAT must not touch other suites.
let server: RedisProcess;
let admin: Redis;
const extraServers: RedisProcess[] = [];

beforeAll(async () => {
  server = await startRedis();
  admin = connect('ioredis 6', server.url);
});
afterAll(async () => {
  await Promise.all([server, ...extraServers].map((s) => s?.stop()));
});

describe.each(LIBRARIES)('a limiter on a client of %s', (library: LibraryName) => {
  it('takes quota leases, admits no more than the limit over 3 clients, and gives back what they held', async () => {
    const clients = await Promise.all([1, 2, 3].map(() => open(library, server.url)));
    await expectQuotaLeasesExact(clients, 'byo-leases');
  });

  it('admits exactly the limit with every algorithm and with a mixed tier, and resets', async () => {
    const client = await open(library, server.url);
    await expectEveryAlgorithmAndMixedTier(client, 'byo');
    // close() leaves a client passed as `redis` open: another limiter can still use it.
    const again = createLimiter({
      ...STEADY,
      redis: client,
      prefix: uniquePrefix('byo'),
      limit: 1,
      window: '1d',
    });
    expect((await again.consume('tenant')).allowed).toBe(true);
    await again.close();
  });

  it('runs by FCALL once its library is loaded, and recovers from FUNCTION FLUSH and SCRIPT FLUSH', async () => {
    await expectFlushRecovery(await open(library, server.url), [admin]);
  });

  // Where Redis functions are missing (before Redis 7) or denied, calls run as scripts.
  it('recovers from SCRIPT FLUSH with one EVAL, counting the request once', async () => {
    const client = await open(library, await scriptsOnlyUrl(admin, server));
    const limiter = createLimiter({
      ...STEADY,
      redis: client,
      prefix: uniquePrefix('noscript'),
      limit: 5,
      window: '1d',
    });
    expect((await limiter.consume('tenant')).remaining).toBe(4);
    await admin.script('FLUSH');
    await admin.config('RESETSTAT');
    const decision = await limiter.consume('tenant');
    expect(decision).toMatchObject({ allowed: true, remaining: 3 });
    expect(decision.degraded).toBeUndefined();
    expect({
      evalsha: await commandCalls([admin], 'evalsha'),
      eval: await commandCalls([admin], 'eval'),
    }).toEqual({
      evalsha: 1,
      eval: 1,
    });
    // The script is cached again: the next call needs no EVAL.
    expect((await limiter.consume('tenant')).remaining).toBe(2);
    expect(await commandCalls([admin], 'eval')).toBe(1);
    await limiter.close();
  });

  it('admits exactly 50 of 500 concurrent requests over 4 clients', async () => {
    const prefix = uniquePrefix('race');
    const clients = await Promise.all(Array.from({ length: 4 }, () => open(library, server.url)));
    const limiters = clients.map((client) =>
      createLimiter({ ...STEADY, redis: client, prefix, limit: 50, window: '1h' }),
    );
    const decisions = await Promise.all(
      Array.from({ length: 500 }, (_, i) => limiters[i % 4]?.consume('tenant')),
    );
    expect(decisions.filter((d) => d?.allowed)).toHaveLength(50);
    expect(decisions.filter((d) => d?.degraded !== undefined)).toHaveLength(0);
    await Promise.all(limiters.map((limiter) => limiter.close()));
  });

  it('limits an Express app given the client as its redis option', async () => {
    const client = await open(library, server.url);
    // The adapter only passes the client on: which library made it makes no difference.
    expect(await expressAnswers(client, uniquePrefix('express'))).toEqual({
      statuses: [200, 200, 200, 429],
      degraded: [],
    });
  });

  it('fails open and reports the store when its server is stopped', async () => {
    const own = await startRedis();
    extraServers.push(own);
    const errors: SentinelError[] = [];
    const options: LimiterOptions = {
      redis: await open(library, own.url),
      prefix: uniquePrefix('down'),
      limit: 2,
      window: '1d',
      onError: (error) => errors.push(error),
    };
    const limiter = createLimiter(options);
    expect((await limiter.consume('tenant')).degraded).toBeUndefined();
    await own.stop();
    const started = performance.now();
    const decisions = [];
    for (let i = 0; i < 5; i++) decisions.push(await limiter.consume('tenant'));
    // Past the limit of 2, yet admitted: the store is down and the mode is 'allow'.
    expect(decisions.map((d) => [d.allowed, d.degraded])).toEqual(
      Array.from({ length: 5 }, () => [true, 'allow']),
    );
    // Five calls, each bounded by the 50 ms deadline at worst; the breaker skips the later ones.
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(errors.length).toBeGreaterThan(0);
    for (const error of errors)
      expect(['STORE_UNAVAILABLE', 'STORE_TIMEOUT']).toContain(error.code);
    await limiter.close();
  });
});
