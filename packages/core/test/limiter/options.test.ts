// Bad configuration throws a TypeError at construction that names the option; bad calls fail clearly.
import { describe, expect, it } from 'vitest';
import { connect } from '../../../../test/harness/clients.ts';
import {
  createLimiter,
  type LimiterOptions,
  MemoryStore,
  type PolicyOptions,
  parseWindow,
  RedisStore,
  type SentinelError,
} from '../../src/index.ts';
import { POLICY_FIELDS } from '../../src/limiter/policy.ts';
import { constructionError } from '../construction-errors.ts';

const rejects = (options: unknown) =>
  constructionError(() => createLimiter(options as LimiterOptions));

describe('createLimiter rejects at construction', () => {
  it.each([
    ['a negative limit', { limit: -1, window: '1m' }, '`limit`'],
    ['a zero limit', { limit: 0, window: '1m' }, '`limit`'],
    ['a fractional limit', { limit: 1.5, window: '1m' }, '`limit`'],
    ['a limit given as a string', { limit: '10', window: '1m' }, '`limit`'],
    ['an unknown algorithm', { limit: 1, window: '1m', algorithm: 'leaky' }, '`algorithm`'],
    ['an unparsable window', { limit: 1, window: '1 fortnight' }, '`window`'],
    ['a fractional window', { limit: 1, window: '1.5m' }, '`window`'],
    ['a zero window', { limit: 1, window: 0 }, '`window`'],
    ['a missing window', { limit: 1 }, '`window`'],
    [
      'a sliding window log past its per-request cap',
      { limit: 10 ** 9, window: '1d', algorithm: 'sliding-window-log' },
      '`limit`',
    ],
    ['an empty policy list', { policies: [] }, '`policies`'],
    [
      'a bad policy in a list',
      {
        policies: [
          { limit: 1, window: '1s' },
          { limit: 1, window: 'x' },
        ],
      },
      '`policies[1].window`',
    ],
    [
      'two policies with one name',
      {
        policies: [
          { name: 'a', limit: 1, window: '1s' },
          { name: 'a', limit: 2, window: '1m' },
        ],
      },
      '`policies`',
    ],
    [
      'a policy name that is not a token',
      { policies: { name: 'a b', limit: 1, window: '1s' } },
      '`policies.name`',
    ],
    ['no policies at all', {}, '`policies`'],
    [
      'policies and tiers together',
      { policies: { limit: 1, window: '1s' }, tiers: { FREE: { limit: 1, window: '1s' } } },
      '`tiers`',
    ],
    ['an empty tier', { tiers: { FREE: [] } }, '`tiers.FREE`'],
    [
      'a tier with a bad window',
      { tiers: { FREE: { limit: 10, window: '1m' }, PRO: { limit: 10, window: 'soon' } } },
      '`tiers.PRO.window`',
    ],
    ['no tiers in tiers', { tiers: {} }, '`tiers`'],
    [
      'a default tier that does not exist',
      { tiers: { PRO: { limit: 1, window: '1s' } }, defaultTier: 'FREE' },
      '`defaultTier`',
    ],
    [
      'a default tier without tiers',
      { limit: 1, window: '1s', defaultTier: 'FREE' },
      '`defaultTier`',
    ],
    [
      'an unknown failure mode',
      { limit: 1, window: '1s', onStoreError: 'ignore' },
      '`onStoreError`',
    ],
    ['a prefix with a brace', { limit: 1, window: '1s', prefix: 'a{b' }, '`prefix`'],
    ['an empty prefix', { limit: 1, window: '1s', prefix: '' }, '`prefix`'],
    ['an onError that is not a function', { limit: 1, window: '1s', onError: 'log' }, '`onError`'],
    [
      'a breaker with no failures',
      { limit: 1, window: '1s', breaker: { failures: 0 } },
      '`breaker.failures`',
    ],
    [
      'a breaker with a negative cool-down',
      { limit: 1, window: '1s', breaker: { cooldownMs: -1 } },
      '`breaker.cooldownMs`',
    ],
    ['a store that is not one', { limit: 1, window: '1s', store: {} }, '`store`'],
  ])('%s', (_, options, option) => {
    expect(rejects(options)).toContain(option);
  });

  it('a redis client together with a store', () => {
    expect(
      rejects({ limit: 1, window: '1s', store: new MemoryStore(), redis: connect() }),
    ).toContain('`redis`');
  });

  it('a timeout given beside a store, where it would be silently ignored', () => {
    expect(rejects({ limit: 1, window: '1s', store: new MemoryStore(), timeout: 10 })).toContain(
      '`timeout`',
    );
  });

  it.each(['timeout', 'connectTimeout'])(
    'a %s without a Redis store, where the memory store would silently ignore it',
    (option) => {
      expect(rejects({ limit: 1, window: '1s', [option]: 10 })).toBe(
        `@sentinel/core: \`${option}\` applies to a Redis store only: pass \`redis\` or \`redisUrl\` with it, or leave it out for the memory store`,
      );
    },
  );

  it('a zero or fractional timeout for a Redis store', () => {
    expect(rejects({ limit: 1, window: '1s', redis: connect(), timeout: 0 })).toContain(
      '`timeout`',
    );
    expect(() => new RedisStore({ client: connect(), connectTimeout: 1.5 })).toThrow(
      /`connectTimeout`/,
    );
  });

  // A gateway's clock standing in for Redis's is the bug the scripts exist to avoid.
  it.each([
    ['a limiter', () => createLimiter({ limit: 1, window: '1s', clock: Date.now } as never)],
    [
      'a limiter on Redis',
      () => createLimiter({ limit: 1, window: '1s', redis: connect(), clock: Date.now } as never),
    ],
    ['a Redis store', () => new RedisStore({ client: connect(), clock: Date.now } as never)],
  ])('a clock given to %s, saying it belongs to the memory store', (_, build) => {
    expect(constructionError(build)).toBe(
      "@sentinel/core: `clock` belongs to the memory store, for tests: `store: new MemoryStore({ clock })`. A Redis store decides on Redis's clock alone",
    );
  });

  it('something that is not a Redis client', () => {
    expect(() => new RedisStore({ client: {} as never })).toThrow(/`client`/);
  });
});

describe('windows', () => {
  it.each([
    [250, 250],
    ['250ms', 250],
    ['10s', 10_000],
    ['1m', 60_000],
    ['1h', 3_600_000],
    ['1d', 86_400_000],
    [' 2 m ', 120_000],
  ])('read %j as %d ms', (window, ms) => {
    expect(parseWindow(window)).toBe(ms);
  });

  it.each([['1.5s'], ['-1s'], ['1w'], [''], [Number.NaN], [1.5], [-1], [null]])(
    'refuse %j',
    (window) => {
      expect(parseWindow(window)).toBeUndefined();
    },
  );
});

describe('a call', () => {
  it.each([[0], [-1], [1.5], [Number.NaN]])(
    'with cost %s is rejected with a TypeError',
    async (cost) => {
      const limiter = createLimiter({ limit: 5, window: '1s' });
      await expect(limiter.consume('a', { cost })).rejects.toThrow(/`cost`/);
    },
  );

  it('names default policies after their tier, limit and window', async () => {
    const limiter = createLimiter({
      tiers: {
        FREE: { limit: 10, window: '1m' },
        PRO: [
          { limit: 100, window: '1m' },
          { limit: 20, window: '1s' },
        ],
      },
    });
    expect((await limiter.consume('a')).policy).toBe('free-10-per-1m');
    expect((await limiter.consume('a', { tier: 'PRO' })).policies.map((p) => p.policy)).toEqual([
      'pro-100-per-1m',
      'pro-20-per-1s',
    ]);
  });

  it('for an unknown tier is reported and answered by the failure mode, never silently unlimited', async () => {
    const errors: SentinelError[] = [];
    const tiers = { FREE: { limit: 1, window: '1m' as const } };
    const open = createLimiter({ tiers, onError: (error) => errors.push(error) });
    const admitted = await open.consume('a', { tier: 'GOLD' });
    expect(admitted).toMatchObject({ allowed: true, degraded: 'allow' });
    const closed = createLimiter({
      tiers,
      onStoreError: 'deny',
      onError: (error) => errors.push(error),
    });
    const refused = await closed.consume('a', { tier: 'GOLD' });
    expect(refused).toMatchObject({ allowed: false, degraded: 'deny' });
    expect(errors.map((error) => [error.code, error.message])).toEqual([
      ['UNKNOWN_TIER', "No tier named 'GOLD'"],
      ['UNKNOWN_TIER', "No tier named 'GOLD'"],
    ]);
  });
});

describe("the shorthand: a policy's fields at the top level", () => {
  /** Every field a policy takes; the first check below fails when a field joins PolicyOptions. */
  const LOGIN: Required<PolicyOptions> = {
    name: 'login',
    limit: 2,
    window: '1m',
    algorithm: 'fixed-window',
    blockFor: '10m',
  };

  it('takes every field a policy takes, and decides as that policy in `policies` does', async () => {
    expect(Object.keys(LOGIN).sort()).toEqual([...POLICY_FIELDS].sort());
    let now = Date.UTC(2030, 0, 1);
    const clock = () => now;
    const shorthand = createLimiter({ store: new MemoryStore({ clock }), ...LOGIN });
    const spelledOut = createLimiter({ store: new MemoryStore({ clock }), policies: LOGIN });
    const run = async (limiter: ReturnType<typeof createLimiter>) => {
      const seen = [];
      for (let i = 0; i < 3; i++) seen.push(await limiter.consume('ip:1'));
      // Past the window, only the penalty box still refuses.
      now += 2 * 60_000;
      seen.push(await limiter.consume('ip:1'));
      return seen;
    };
    const fromShorthand = await run(shorthand);
    now = Date.UTC(2030, 0, 1);
    expect(await run(spelledOut)).toEqual(fromShorthand);
    expect(fromShorthand.map((d) => d.allowed)).toEqual([true, true, false, false]);
    expect(fromShorthand[3]).toMatchObject({ policy: 'login', limit: 2 });
    expect(fromShorthand[3]?.retryAfterMs).toBe(8 * 60_000);
    await Promise.all([shorthand.close(), spelledOut.close()]);
  });

  it.each([
    [
      { policies: { limit: 1, window: '1s' }, blockFor: '1m' },
      '`blockFor` cannot be combined with `policies`',
    ],
    [
      { policies: { limit: 1, window: '1s' }, limit: 2 },
      '`limit` cannot be combined with `policies`',
    ],
    [
      { name: 'x', tiers: { FREE: { limit: 1, window: '1s' } } },
      '`tiers` cannot be combined with `name`',
    ],
  ])('cannot be combined with `policies` or `tiers`: %o', (options, message) => {
    const error = rejects(options);
    expect(error).toContain(message);
    expect(error).toContain(
      '`name`, `limit`, `window`, `algorithm`, `blockFor`, `concurrency` and `lease`',
    );
  });

  it('names a bad field bare, as it was written', () => {
    expect(rejects({ limit: 1, window: '1s', blockFor: 'soon' })).toMatch(
      /^@sentinel\/core: `blockFor` must be/,
    );
    expect(rejects({ limit: 1, window: '1s', name: 'a b' })).toMatch(
      /^@sentinel\/core: `name` must be/,
    );
    expect(rejects({ blockFor: '1m', window: '1s' })).toMatch(/^@sentinel\/core: `limit` must be/);
  });
});
