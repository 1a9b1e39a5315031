// Unknown options and other rate limiters' option names are refused at construction, by name.
import { describe, expect, it } from 'vitest';
import { connect } from '../../../../test/harness/clients.ts';
import { createLimiter, type LimiterOptions, MemoryStore, RedisStore } from '../../src/index.ts';
import { LIMITER_OPTION_NAMES } from '../../src/limiter/limiter.ts';
import { POLICY_FIELDS } from '../../src/limiter/policy.ts';
import { PEER_OPTION_NAMES } from '../../src/shared/peer-option-names.ts';
import { rejectUnknownFields, rejectUnknownOptions } from '../../src/shared/validation.ts';
import { constructionError } from '../construction-errors.ts';

const messageOf = constructionError;

const limiterError = (options: Record<string, unknown>) =>
  messageOf(() => createLimiter(options as LimiterOptions));

const ONE = { limit: 1, window: '1s' } as const;

describe('createLimiter refuses an option it does not know', () => {
  it.each([
    ['onStoreErorr', 'onStoreError'],
    ['polices', 'policies'],
    ['redisURL', 'redisUrl'],
    ['defaulttier', 'defaultTier'],
    ['prefx', 'prefix'],
    ['breakers', 'breaker'],
    ['timeOut', 'timeout'],
  ])('names the typo `%s` and suggests `%s`', (typo, known) => {
    expect(limiterError({ ...ONE, [typo]: 'x' })).toBe(
      `@sentinel/core: \`${typo}\` is not an option: did you mean \`${known}\`?`,
    );
  });

  it('names a stranger without a guess when no known name is near', () => {
    expect(limiterError({ ...ONE, flavour: 'vanilla' })).toBe(
      '@sentinel/core: `flavour` is not an option',
    );
  });

  it('names every unknown option at once', () => {
    const message = limiterError({ ...ONE, colour: 1, polices: [] });
    expect(message).toContain('`colour` is not an option');
    expect(message).toContain('`polices` is not an option: did you mean `policies`?');
  });

  it('refuses an unknown option even when its value is undefined', () => {
    expect(limiterError({ ...ONE, onStoreErorr: undefined })).toContain('`onStoreErorr`');
  });

  it('accepts every name in LIMITER_OPTION_NAMES, and refuses each one misspelt', () => {
    expect(LIMITER_OPTION_NAMES).toContain('breaker');
    for (const name of LIMITER_OPTION_NAMES) {
      // Set first, so that the single policy below still applies: only the name is on trial.
      const limiter = createLimiter({ [name]: undefined, ...ONE } as LimiterOptions);
      void limiter.close();
      expect(limiterError({ [`${name}Z`]: undefined, ...ONE })).toContain(`\`${name}Z\``);
    }
  });

  it('accepts every policy field at the top level, and suggests one misspelt there', () => {
    for (const field of POLICY_FIELDS) expect(LIMITER_OPTION_NAMES).toContain(field);
    expect(limiterError({ ...ONE, blockfor: '1m' })).toBe(
      '@sentinel/core: `blockfor` is not an option: did you mean `blockFor`?',
    );
  });

  it('refuses an unknown field of `breaker`, named under it', () => {
    expect(limiterError({ ...ONE, breaker: { failure: 3 } })).toBe(
      '@sentinel/core: `breaker.failure` is not an option: did you mean `breaker.failures`?',
    );
  });

  it('refuses an unknown RedisStore option', () => {
    expect(messageOf(() => new RedisStore({ client: connect(), timout: 10 } as never))).toBe(
      '@sentinel/core: `timout` is not an option: did you mean `timeout`?',
    );
  });

  it('refuses an unknown MemoryStore option', () => {
    expect(messageOf(() => new MemoryStore({ maxKey: 10 } as never))).toBe(
      '@sentinel/core: `maxKey` is not an option: did you mean `maxKeys`?',
    );
  });

  it('refuses an unknown field of a policy, named where it was written, and lists the fields', () => {
    expect(limiterError({ tiers: { FREE: { limit: 1, window: '1s', algoritm: 'gcra' } } })).toBe(
      '@sentinel/core: `tiers.FREE.algoritm` is not a field of a policy: did you mean `tiers.FREE.algorithm`? ' +
        'A policy takes `name`, `limit`, `window`, `algorithm` and `blockFor`.',
    );
    expect(limiterError({ policies: { limit: 1, window: '1s', colour: 'red' } })).toBe(
      '@sentinel/core: `policies.colour` is not a field of a policy. ' +
        'A policy takes `name`, `limit`, `window`, `algorithm` and `blockFor`.',
    );
    expect(limiterError({ policies: [{ max: 5, windowMs: 1000 }] })).toMatch(
      /^@sentinel\/core: `policies\[0\]\.max` is .*`limit`/,
    );
  });
});

describe("another rate limiter's option name", () => {
  it('{ windowMs, max } says what each is called here, not that `policies` is missing', () => {
    const message = limiterError({ windowMs: 15 * 60_000, max: 100 });
    expect(message).toContain(
      "`windowMs` is the name in express-rate-limit and hono-rate-limiter: use `window`, in milliseconds or a string such as '15m'",
    );
    expect(message).toContain(
      '`max` is the name in express-rate-limit, @fastify/rate-limit and koa-ratelimit: use `limit`',
    );
    expect(message).not.toContain('required');
  });

  it.each(Object.entries(PEER_OPTION_NAMES))(
    '`%s` names its library and our equivalent, or says there is none',
    (name, { peers, use }) => {
      const message = limiterError({ ...ONE, [name]: 1 });
      expect(message).toContain(`\`${name}\` is `);
      for (const peer of peers) expect(message).toContain(peer);
      if (use === undefined) expect(message).toContain('Sentinel has no equivalent yet');
      else expect(message).toContain(`use ${use}`);
    },
  );

  it('points rate-limiter-flexible and koa-ratelimit users to our names', () => {
    expect(limiterError({ points: 10, duration: 60 })).toMatch(/`points` .* use `limit`/);
    expect(limiterError({ ...ONE, storeClient: {} })).toContain('use `redis`');
    expect(limiterError({ ...ONE, db: {} })).toContain('use `redis`');
    expect(limiterError({ ...ONE, keyPrefix: 'x' })).toContain('use `prefix`');
    expect(limiterError({ ...ONE, blockDuration: 60 })).toContain(
      "`blockDuration` is rate-limiter-flexible's name: use a policy's `blockFor`",
    );
  });
});

describe('rejectUnknownOptions, as every layer calls it', () => {
  const known = [...LIMITER_OPTION_NAMES, 'onLimited', 'allowList', 'identify', 'handler'];

  it('labels the message with the layer and suggests the layer’s own names', () => {
    expect(
      messageOf(() => rejectUnknownOptions({ onLimted() {} }, known, '@sentinel/express')),
    ).toBe('@sentinel/express: `onLimted` is not an option: did you mean `onLimited`?');
    expect(messageOf(() => rejectUnknownOptions({ allowlist: [] }, known, '@sentinel/koa'))).toBe(
      '@sentinel/koa: `allowlist` is not an option: did you mean `allowList`?',
    );
  });

  it('takes the known names as a Set too, and passes a known name in either form', () => {
    expect(() => rejectUnknownOptions({ handler() {} }, new Set(known), '@x')).not.toThrow();
    expect(() => rejectUnknownOptions({ handler() {} }, known, '@x')).not.toThrow();
    expect(
      messageOf(() => rejectUnknownOptions({ keyGenerator() {} }, new Set(known), '@x')),
    ).toContain('use `identify`');
  });

  it('names the fields of a nested object under it, or bare at the top level', () => {
    const policy = ['name', 'limit', 'window', 'algorithm'];
    expect(messageOf(() => rejectUnknownFields({ limt: 1 }, policy, 'tiers.PRO[1]'))).toBe(
      '@sentinel/core: `tiers.PRO[1].limt` is not an option: did you mean `tiers.PRO[1].limit`?',
    );
    expect(messageOf(() => rejectUnknownFields({ windowMs: 1 }, policy, ''))).toMatch(
      /^@sentinel\/core: `windowMs` is the name in express-rate-limit and hono-rate-limiter/,
    );
  });

  it('lets a name we share with a peer through wherever we know it', () => {
    // `store` is express-rate-limit's name too, but it is ours: no migration advice for it.
    expect(() => rejectUnknownOptions({ store: {} }, known, '@x')).not.toThrow();
    for (const name of Object.keys(PEER_OPTION_NAMES)) expect(known).not.toContain(name);
  });
});
