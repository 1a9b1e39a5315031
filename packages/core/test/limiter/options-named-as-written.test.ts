// Each configuration error names the option as the user wrote it, not as the code holds it.
import { describe, expect, it } from 'vitest';
import { connect, uniquePrefix } from '../../../../test/harness/clients.ts';
import { createLimiter, type LimiterOptions, RedisStore } from '../../src/index.ts';
import { constructionError } from '../construction-errors.ts';

const messageOf = (options: unknown) =>
  constructionError(() => createLimiter(options as LimiterOptions));

describe('the single-policy shorthand', () => {
  it.each([
    ['window', { limit: 5, window: '5 minutes' }],
    ['limit', { limit: 0, window: '1m' }],
    ['algorithm', { limit: 5, window: '1m', algorithm: 'leaky-bucket' }],
  ])('names `%s` bare, as written at the top level', (option, options) => {
    expect(messageOf(options)).toMatch(new RegExp(`^@sentinel/core: \`${option}\` `));
  });

  it('while a policy list still names the policy by its place', () => {
    expect(messageOf({ policies: [{ limit: 5, window: 'soon' }] })).toMatch(
      /^@sentinel\/core: `policies\[0\]\.window` /,
    );
  });
});

describe('a Redis client given as `redis`', () => {
  it('a URL string is named `redis`, pointing to `redisUrl`', () => {
    const message = messageOf({ limit: 1, window: '1s', redis: 'redis://127.0.0.1:6379' });
    expect(message).toMatch(/^@sentinel\/core: `redis` must be a client/);
    expect(message).toContain('`redisUrl`');
    expect(message).not.toContain('`client`');
  });

  it('something else that is not a client is named `redis` too', () => {
    expect(messageOf({ limit: 1, window: '1s', redis: { host: 'localhost' } })).toMatch(
      /^@sentinel\/core: `redis` must be an ioredis, iovalkey or node-redis client .*got an object/,
    );
  });

  it('while RedisStore itself names its own `client`', () => {
    expect(() => new RedisStore({ client: 'redis://127.0.0.1:6379' as never })).toThrow(
      /^@sentinel\/core: `client` must be a client, got a string: pass a URL as `redisUrl`/,
    );
  });

  it('a real client is accepted as `redis`', async () => {
    const limiter = createLimiter({
      limit: 1,
      window: '1s',
      redis: connect(),
      prefix: uniquePrefix('named'),
    });
    expect((await limiter.consume('named-as-written')).allowed).toBe(true);
    await limiter.close();
  });
});

describe('the breaker', () => {
  it.each([
    [true, '`breaker` must be { failures, cooldownMs } or false, got true'],
    [null, '`breaker` must be { failures, cooldownMs } or false, got null'],
    [{ failures: 1.5 }, '`breaker.failures` must be a positive integer, got 1.5'],
    [{ cooldownMs: '1s' }, "`breaker.cooldownMs` must be a positive integer, got '1s'"],
  ])('%j is refused by name', (breaker, message) => {
    expect(messageOf({ limit: 1, window: '1s', breaker })).toBe(`@sentinel/core: ${message}`);
  });
});
