// The throttler counter: exact across clients racing on one Redis, options checked by name, keys hashed, and a failing Redis answered by the failure mode.
import { afterEach, describe, expect, inject, it } from 'vitest';
import { connect, uniquePrefix } from '../../../../test/harness/clients.ts';
import { clientOf, ownServer, readyClient, timed } from '../../../../test/harness/own-redis.ts';
import { waitFor } from '../../../../test/harness/wait-for.ts';
import { SentinelError } from '../../src/index.ts';
import {
  ThrottlerCounter,
  type ThrottlerCounterOptions,
} from '../../src/limiter/throttler-counter.ts';
import { constructionError } from '../construction-errors.ts';

const counters: ThrottlerCounter[] = [];
afterEach(async () => {
  await Promise.all(counters.splice(0).map((counter) => counter.close()));
});

/** A counter closed after the test, and the errors it reports. */
function counterOn(options: ThrottlerCounterOptions = {}) {
  const errors: SentinelError[] = [];
  const counter = new ThrottlerCounter({
    prefix: uniquePrefix('throttler'),
    onError: (error) => errors.push(error),
    ...options,
  });
  counters.push(counter);
  return { counter, errors };
}

describe('on one Redis shared by several clients', () => {
  it.each([
    ['without a block', 0],
    ['with a block', 60_000],
  ])('admits exactly the limit of 1200 racing increments, %s', async (_, blockDuration) => {
    const prefix = uniquePrefix('throttler-race');
    // A generous deadline and a refusing failure mode: a slow Redis cannot admit more, and any
    // failure is reported and fails the test.
    const gateways = Array.from({ length: 4 }, () =>
      counterOn({ redis: connect(), prefix, timeout: 5_000, onStoreError: 'deny' }),
    );
    const records = await Promise.all(
      Array.from({ length: 1200 }, (_, i) =>
        (gateways[i % 4] as (typeof gateways)[number]).counter.increment(
          'a'.repeat(64),
          60_000,
          100,
          blockDuration,
          'default',
        ),
      ),
    );
    expect(gateways.flatMap(({ errors }) => errors)).toEqual([]);
    const admitted = records.filter((record) => !record.isBlocked);
    expect(admitted).toHaveLength(100);
    // Each count from 1 to the limit was answered once: no two increments read the same count.
    expect(admitted.map((record) => record.totalHits).sort((a, b) => a - b)).toEqual(
      Array.from({ length: 100 }, (_, i) => i + 1),
    );
    for (const record of records.filter((r) => r.isBlocked)) {
      expect(record.totalHits).toBe(101);
      expect(record.timeToBlockExpire).toBeGreaterThan(0);
    }
  });
});

describe('keys', () => {
  it('keep the guard’s SHA-256 key, and hash any other, so no raw identifier reaches Redis', async () => {
    const redis = connect();
    const prefix = uniquePrefix('throttler-keys');
    const { counter } = counterOn({ redis, prefix });
    const hashed = 'f'.repeat(64);
    await counter.increment(hashed, 60_000, 5, 0, 'default');
    await counter.increment('sk_live_secret{tag}', 60_000, 5, 0, 'default');
    const keys = await redis.keys(`${prefix}:*`);
    expect(keys).toContain(`${prefix}:throttler:{${hashed}}`);
    expect(keys).toContain(`${prefix}:throttler:{${hashed}}:default`);
    expect(keys).toHaveLength(4);
    expect(keys.join(' ')).not.toContain('secret');
    for (const key of keys) expect(key).toMatch(/^[^{]+:throttler:\{[0-9a-f]{64}\}(:default)?$/);
  });

  it('count in this process’s memory without Redis, as on Redis', async () => {
    const { counter } = counterOn();
    const hits = [];
    for (let i = 0; i < 4; i++) hits.push(await counter.increment('key', 60_000, 2, 30_000, 'x'));
    expect(hits.map((record) => [record.totalHits, record.isBlocked])).toEqual([
      [1, false],
      [2, false],
      [3, true],
      [3, true],
    ]);
    expect(hits[2]).toMatchObject({ timeToExpire: 60, timeToBlockExpire: 30 });
  });
});

describe('options', () => {
  const redis = () => connect();
  it.each<[string, () => ThrottlerCounterOptions]>([
    ['`redis`', () => ({ redis: {} as never })],
    ['`redisUrl`', () => ({ redisUrl: 'http://localhost:6379' })],
    ['`redisUrl` cannot be combined', () => ({ redis: redis(), redisUrl: 'redis://localhost' })],
    ['`prefix`', () => ({ prefix: 'a{b}' })],
    ['`onStoreError`', () => ({ onStoreError: 'maybe' as never })],
    ['`onError`', () => ({ onError: 'log' as never })],
    ['`timeout`', () => ({ redis: redis(), timeout: 0 })],
    ['`timeout` applies to Redis only', () => ({ timeout: 50 })],
    ['`connectTimeout`', () => ({ redis: redis(), connectTimeout: 1.5 })],
    ['`breaker.failures`', () => ({ redis: redis(), breaker: { failures: 0 } })],
    ['`ttl` belongs to ThrottlerModule.forRoot()', () => ({ ttl: 60_000 }) as never],
    ['did you mean `prefix`', () => ({ prefx: 'a' }) as never],
  ])('throw a TypeError naming %s', (name, options) => {
    expect(constructionError(() => new ThrottlerCounter(options()))).toContain(name);
  });

  it('refuse an increment of what no guard passes, by argument', async () => {
    const { counter } = counterOn();
    await expect(counter.increment('k', Number.NaN, 1, 0, 'x')).rejects.toThrow(/`ttl`/);
    await expect(counter.increment(1 as never, 1000, 1, 0, 'x')).rejects.toThrow(/`key`/);
  });

  it('clamp an endless ttl and limit so that every time stays exact', async () => {
    const { counter, errors } = counterOn({ redis: connect() });
    const record = await counter.increment('k', Number.POSITIVE_INFINITY, Infinity, 0, 'x');
    expect(errors).toEqual([]);
    expect(record).toMatchObject({ totalHits: 1, isBlocked: false });
    expect(record.timeToExpire).toBe(3_155_760_000);
  });
});

describe('when Redis fails', () => {
  // Nothing listens on port 1: the client never connects, and calls fail after connectTimeout.
  const down = () => connect('ioredis 6', 'redis://127.0.0.1:1', { lazyConnect: true });

  it.each([
    ['allow', { totalHits: 0, timeToExpire: 60, isBlocked: false, timeToBlockExpire: 0 }],
    ['deny', { totalHits: 6, timeToExpire: 60, isBlocked: true, timeToBlockExpire: 1 }],
  ] as const)('answers by onStoreError %s, and reports the failure', async (mode, expected) => {
    const { counter, errors } = counterOn({
      redis: down(),
      connectTimeout: 50,
      onStoreError: mode,
    });
    expect(await counter.increment('k', 60_000, 5, 0, 'x')).toEqual(expected);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(SentinelError);
    expect(errors[0]?.code).toBe('STORE_UNAVAILABLE');
  });

  it("counts in this process's memory with onStoreError 'local'", async () => {
    const { counter } = counterOn({ redis: down(), connectTimeout: 50, onStoreError: 'local' });
    const blocked = [];
    for (let i = 0; i < 3; i++) {
      blocked.push((await counter.increment('k', 60_000, 2, 0, 'x')).isBlocked);
    }
    expect(blocked).toEqual([false, false, true]);
  });

  it('never hangs on a silent Redis: the deadline passes, then the breaker skips it', async () => {
    const server = await ownServer();
    const client = await readyClient(server, {});
    const { counter, errors } = counterOn({ redis: client, timeout: 50 });
    expect((await counter.increment('k', 60_000, 5, 0, 'x')).totalHits).toBe(1);
    server.pause();
    for (let i = 0; i < 3; i++) {
      const { value, ms } = await timed(counter.increment('k', 60_000, 5, 0, 'x'));
      expect(value).toMatchObject({ totalHits: 0, isBlocked: false });
      // Typically 48 to 50 ms; ten times that at most, whatever the load.
      expect(ms).toBeLessThan(600);
    }
    expect(errors.map((error) => error.code)).toEqual([
      'STORE_TIMEOUT',
      'STORE_TIMEOUT',
      'STORE_TIMEOUT',
    ]);
    // The breaker is open: answered at once, without a call or another report.
    const { ms } = await timed(counter.increment('k', 60_000, 5, 0, 'x'));
    expect(ms).toBeLessThan(20);
    expect(errors).toHaveLength(3);
  });
});

describe('close()', () => {
  it('closes the client it built from redisUrl, and answers by onStoreError after', async () => {
    const admin = connect();
    const name = uniquePrefix('throttler-client').replaceAll('-', '_');
    const { counter, errors } = counterOn({
      redisUrl: `${inject('redisUrl')}?connectionName=${name}`,
    });
    expect((await counter.increment('k', 60_000, 5, 0, 'x')).totalHits).toBe(1);
    const connected = async () => String(await admin.client('LIST')).includes(`name=${name} `);
    expect(await connected()).toBe(true);
    await counter.close();
    await waitFor(async () => !(await connected()), 5_000, 'the client to close');
    expect(await counter.increment('k', 60_000, 5, 0, 'x')).toMatchObject({ totalHits: 0 });
    expect(errors.map((error) => error.code)).toEqual(['STORE_UNAVAILABLE']);
  });

  it('leaves a client given as redis open', async () => {
    const redis = clientOf(inject('redisUrl'));
    const { counter } = counterOn({ redis });
    await counter.increment('k', 60_000, 5, 0, 'x');
    await counter.close();
    expect(await redis.ping()).toBe('PONG');
  });
});
