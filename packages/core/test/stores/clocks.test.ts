// Whose clock decides: a memory store's own `clock`, which a test moves; Redis's, whatever a caller sends.
import { afterEach, describe, expect, it } from 'vitest';
import { connect, uniquePrefix } from '../../../../test/harness/clients.ts';
import { failOnError } from '../../../../test/harness/store-errors.ts';
import {
  createLimiter,
  type Limiter,
  type LimiterOptions,
  MemoryStore,
  RedisStore,
  type Store,
} from '../../src/index.ts';
import { manualClock } from '../stores.ts';

const limiters: Limiter[] = [];
afterEach(async () => {
  await Promise.all(limiters.splice(0).map((limiter) => limiter.close()));
});

function limiterOver(store: Store, options: Omit<LimiterOptions, 'store'>): Limiter {
  const limiter = createLimiter({
    prefix: uniquePrefix('clocks'),
    onError: failOnError,
    ...options,
    store,
  });
  limiters.push(limiter);
  return limiter;
}

describe('a MemoryStore given a clock', () => {
  it('refills a window as the clock moves, with no time passing', async () => {
    const clock = manualClock();
    const limiter = limiterOver(new MemoryStore({ clock: clock.now }), { limit: 10, window: '1m' });
    for (let i = 0; i < 10; i++) expect((await limiter.consume('user')).allowed).toBe(true);
    const refused = await limiter.consume('user');
    expect(refused).toMatchObject({ allowed: false, retryAfterMs: 6_000 });
    clock.advance(5_999);
    expect((await limiter.consume('user')).allowed).toBe(false);
    clock.advance(1);
    expect((await limiter.consume('user')).allowed).toBe(true);
  });

  it('ends a penalty box when the clock reaches its end', async () => {
    const clock = manualClock();
    const limiter = limiterOver(new MemoryStore({ clock: clock.now }), {
      limit: 2,
      window: '1m',
      algorithm: 'fixed-window',
      blockFor: '15m',
    });
    await limiter.consume('user');
    await limiter.consume('user');
    expect(await limiter.consume('user')).toMatchObject({ allowed: false, retryAfterMs: 900_000 });
    // The window has long rolled over, but the box still holds.
    clock.advance(900_000 - 1);
    expect((await limiter.consume('user')).allowed).toBe(false);
    clock.advance(1);
    expect((await limiter.consume('user')).allowed).toBe(true);
  });

  it("lapses a concurrency lease its holder never released once the clock passes the lease's end", async () => {
    const clock = manualClock();
    const limiter = limiterOver(new MemoryStore({ clock: clock.now }), {
      concurrency: 1,
      lease: '30s',
    });
    const held = await limiter.consume('user');
    expect(held.allowed).toBe(true);
    clock.advance(29_999);
    expect((await limiter.consume('user')).allowed).toBe(false);
    clock.advance(1);
    expect((await limiter.consume('user')).allowed).toBe(true);
    // The lapsed lease frees nothing another request holds now.
    expect(await limiter.release(held)).toBe(false);
    expect((await limiter.consume('user')).allowed).toBe(false);
  });

  it('shares its clock with every limiter on it', async () => {
    const clock = manualClock();
    const store = new MemoryStore({ clock: clock.now });
    const options = { prefix: uniquePrefix('clocks'), limit: 1, window: '1h' } as const;
    const [first, second] = [limiterOver(store, options), limiterOver(store, options)];
    expect((await first.consume('user')).allowed).toBe(true);
    expect((await second.consume('user')).allowed).toBe(false);
    clock.advance(3_600_000);
    expect((await second.consume('user')).allowed).toBe(true);
  });

  it('is refused at construction unless it is a function', () => {
    expect(() => new MemoryStore({ clock: 5 as never })).toThrow(
      new TypeError('@sentinel/core: `clock` must be a function, got 5'),
    );
  });
});

describe("Redis's clock", () => {
  it('is the only one a RedisStore has', () => {
    expect(new RedisStore({ client: connect() }).clock).toBeUndefined();
  });

  // A store of one's own that hands a RedisStore the time of its choosing: the scripts still
  // read TIME, so an hour on that clock refills nothing.
  it('decides even when a store in front of a RedisStore sends a clock of its own', async () => {
    const redis = new RedisStore({ client: connect() });
    let now = Date.UTC(2026, 0, 1);
    const inFront: Store = {
      clock: () => now,
      evaluate: (request) => redis.evaluate(request),
      reset: (keys) => redis.reset(keys),
      close: () => redis.close(),
    };
    const limiter = limiterOver(inFront, { limit: 1, window: '1h' });
    expect((await limiter.consume('user')).allowed).toBe(true);
    now += 3_600_000;
    expect((await limiter.consume('user')).allowed).toBe(false);
  });
});
