// The opt-in block cache: refusals answered in process until the store's retry time, counted
// in calls a real Redis server received, and never an admission Redis would not make.
import { describe, expect, it } from 'vitest';
import { uniquePrefix } from '../../../../test/harness/clients.ts';
import { scriptCallsSinceLastLook } from '../../../../test/harness/connection-checks.ts';
import { clientOf, owned, ownServer } from '../../../../test/harness/own-redis.ts';
import { failOnError } from '../../../../test/harness/store-errors.ts';
import { createLimiter, type LimiterOptions } from '../../src/index.ts';
import { manualClock, onRedis } from '../stores.ts';

async function setup(options: Partial<LimiterOptions> = {}) {
  const server = await ownServer();
  const admin = clientOf(server.url);
  const clock = manualClock();
  const limiter = owned(
    createLimiter({
      ...onRedis(clientOf(server.url), { clock: clock.now }),
      prefix: uniquePrefix('block-cache'),
      limit: 3,
      window: '1m',
      blockCache: true,
      onError: failOnError,
      ...options,
    }),
  );
  // Connects, and loads Sentinel's code, so the counts below are of decisions only.
  await limiter.peek('warm-up');
  await admin.config('RESETSTAT');
  /** Calls that ran Sentinel's code since the last look. */
  const calls = scriptCallsSinceLastLook([admin]);
  return { limiter, clock, calls };
}

describe('blockCache', () => {
  it('answers a refused identity in process until its retry time, then asks Redis again', async () => {
    const { limiter, clock, calls } = await setup();
    for (let i = 0; i < 3; i++) expect((await limiter.consume('abuser')).allowed).toBe(true);
    const refused = await limiter.consume('abuser');
    expect(refused).toMatchObject({ allowed: false, retryAfterMs: 20_000 });
    expect(await calls()).toBe(4);

    clock.advance(5_000);
    for (let i = 0; i < 50; i++) {
      expect(await limiter.consume('abuser')).toMatchObject({
        allowed: false,
        retryAfterMs: 15_000,
      });
    }
    expect(await calls()).toBe(0);

    clock.advance(15_000);
    expect((await limiter.consume('abuser')).allowed).toBe(true);
    expect(await calls()).toBe(1);
  });

  it('still asks Redis for a cheaper request, which may fit sooner', async () => {
    const { limiter, calls } = await setup();
    await limiter.consume('client', { cost: 2 });
    expect((await limiter.consume('client', { cost: 2 })).allowed).toBe(false);
    expect((await limiter.consume('client', { cost: 1 })).allowed).toBe(true);
    expect(await calls()).toBe(3);
  });

  it('forgets an identity given a refund on this limiter', async () => {
    const { limiter } = await setup();
    const taken = await limiter.consume('client', { cost: 3 });
    expect((await limiter.consume('client')).allowed).toBe(false);
    expect(await limiter.refund('client', { decision: taken, cost: 1 })).toBe(true);
    expect((await limiter.consume('client')).allowed).toBe(true);
  });

  it('forgets an identity reset on this limiter', async () => {
    const { limiter } = await setup();
    await limiter.consume('client', { cost: 3 });
    expect((await limiter.consume('client')).allowed).toBe(false);
    await limiter.reset('client');
    expect((await limiter.consume('client')).allowed).toBe(true);
  });

  it('keeps the limit exact under a concurrent burst, with the default options otherwise', async () => {
    const server = await ownServer();
    const limiter = owned(
      createLimiter({
        redis: clientOf(server.url),
        prefix: uniquePrefix('block-cache'),
        limit: 10,
        window: '1h',
        blockCache: true,
        onError: failOnError,
      }),
    );
    for (let wave = 0; wave < 3; wave++) {
      const decisions = await Promise.all(
        Array.from({ length: 200 }, () => limiter.consume('burst')),
      );
      expect(decisions.filter((d) => d.allowed)).toHaveLength(wave === 0 ? 10 : 0);
    }
  });

  it('is off by default: every refusal is a Redis call', async () => {
    const { limiter, calls } = await setup({ blockCache: undefined });
    for (let i = 0; i < 10; i++) await limiter.consume('abuser');
    expect(await calls()).toBe(10);
  });

  it('refuses a bad setting with a TypeError naming it', () => {
    const options = { limit: 1, window: '1s' } as const;
    expect(() => createLimiter({ ...options, blockCache: 'yes' as never })).toThrow(
      /`blockCache` must be true, false or \{ maxKeys \}/,
    );
    expect(() => createLimiter({ ...options, blockCache: { maxKeys: 0 } })).toThrow(
      /`blockCache\.maxKeys`/,
    );
    expect(() => createLimiter({ ...options, blockCache: { max: 5 } as never })).toThrow(
      /blockCache\.max\b/,
    );
  });
});
