// Which limit each descriptor of a request gets, as envoyproxy/ratelimit's own tests and README
// say: the most specific match, at the request's own depth, less the limits others replace.
import { describe, expect, it } from 'vitest';
import { entries, limitOf, load, loadText, summary } from './config-fixtures.ts';

describe("upstream's basic configuration", () => {
  const config = load(['basic.yaml']);
  const get = (...pairs: Array<[string, string]>) => limitOf(config, 'test-domain', pairs);

  it('gives nothing to an unknown domain, or to a descriptor with no entries', () => {
    expect(limitOf(config, 'foo_domain', [['key2', 'x']])).toBeUndefined();
    expect(limitOf(config, 'test-domain', [])).toBeUndefined();
  });

  it('gives nothing where the matched level has no limit', () => {
    expect(get(['key1', 'something'])).toBeUndefined();
    expect(get(['key1', 'value1'])).toBeUndefined();
  });

  it('gives nothing to a request with more entries than the configuration is deep', () => {
    expect(get(['key2', 'value2'], ['subkey', 'subvalue'])).toBeUndefined();
  });

  it('gives a level only its own limit, never one above it', () => {
    expect(summary(get(['key5', 'value5']))).toMatchObject({ requestsPerUnit: 15, unit: 'day' });
    expect(get(['key5', 'value5'], ['subkey5', 'subvalue'])).toBeUndefined();
    expect(summary(get(['key5', 'value5'], ['subkey5', 'subvalue5']))).toEqual({
      requestsPerUnit: 25,
      unit: 'day',
      statKey: 'test-domain.key5_value5.subkey5_subvalue5',
    });
  });

  it('matches a key with no value for any value, named by the key alone', () => {
    expect(summary(get(['key1', 'value1'], ['subkey1', 'something']))).toEqual({
      requestsPerUnit: 5,
      unit: 'second',
      statKey: 'test-domain.key1_value1.subkey1',
    });
    expect(summary(get(['key2', 'something']))).toEqual({
      requestsPerUnit: 20,
      unit: 'minute',
      statKey: 'test-domain.key2',
    });
  });

  it('prefers the configured value to the key alone', () => {
    expect(summary(get(['key1', 'value1'], ['subkey1', 'subvalue1']))).toEqual({
      requestsPerUnit: 10,
      unit: 'second',
      statKey: 'test-domain.key1_value1.subkey1_subvalue1',
    });
    expect(summary(get(['key2', 'value2']))).toEqual({
      requestsPerUnit: 30,
      unit: 'minute',
      statKey: 'test-domain.key2_value2',
    });
  });

  it('lets a value configured without a limit pass unlimited by anything', () => {
    expect(get(['key2', 'value3'])).toBeUndefined();
  });

  it('carries the name of a limit, and none where none is configured', () => {
    expect(get(['key3', 'foo'])?.rule).toMatchObject({
      name: undefined,
      requestsPerUnit: 1,
      unit: 'hour',
    });
    expect(get(['key4', 'foo'])?.rule).toMatchObject({ name: 'key4_rate_limit', unit: 'day' });
    expect(get(['key4', 'foo'])?.statKey).toBe('test-domain.key4');
  });

  it('marks an unlimited limit', () => {
    const limit = get(['key6', 'foo']);
    expect(limit?.rule.unlimited).toBe(true);
    expect(limit?.statKey).toBe('test-domain.key6');
  });

  it('names the statistics of detailed_metric with the value the request sent', () => {
    expect(summary(get(['key7', 'unspecified_value']))).toEqual({
      requestsPerUnit: 70,
      unit: 'minute',
      statKey: 'test-domain.key7_unspecified_value',
    });
    expect(get(['key7', 'another_value'])?.statKey).toBe('test-domain.key7_another_value');
    expect(get(['key7', 'another_value'])?.detailedMetric).toBe(true);
  });

  it('counts each value in a bucket of its own, named by the entries sent', () => {
    expect(get(['key1', 'value1'], ['subkey1', 'a'])?.bucket).toEqual(
      entries([
        ['key1', 'value1'],
        ['subkey1', 'a'],
      ]),
    );
    expect(get(['key2', 'b'])?.bucket).toEqual(entries([['key2', 'b']]));
  });

  it('answers each descriptor of a request in order', () => {
    const limits = config.matchAll('test-domain', [
      { entries: entries([['key2', 'x']]) },
      { entries: entries([['nothing', 'x']]) },
      { entries: entries([['key3', 'x']]) },
    ]);
    expect(limits.map((limit) => limit?.rule.requestsPerUnit)).toEqual([20, undefined, 1]);
  });
});

describe('the limit a request names for its descriptor', () => {
  const config = load(['basic.yaml']);
  const request = (value: string, limit: { requestsPerUnit: number; unit: 'day' | 'hour' }) =>
    limitOf(
      config,
      'test-domain',
      [
        ['key1', 'value1'],
        ['subkey1', value],
      ],
      limit,
    );

  it('replaces the configured limit, named with every value sent', () => {
    const limit = request('something', { requestsPerUnit: 10, unit: 'day' });
    expect(limit).toMatchObject({
      statKey: 'test-domain.key1_value1.subkey1_something',
      shadowMode: false,
      detailedMetric: false,
    });
    expect(limit?.rule).toEqual({
      name: undefined,
      unit: 'day',
      unitMultiplier: 1,
      requestsPerUnit: 10,
      unlimited: false,
      algorithm: 'fixed-window',
      windowMs: 86_400_000,
    });
  });

  it('keeps its name and bucket whatever the limit, and takes a new one for another value', () => {
    const first = request('something', { requestsPerUnit: 10, unit: 'day' });
    const changed = request('something', { requestsPerUnit: 42, unit: 'hour' });
    expect(changed?.statKey).toBe(first?.statKey);
    expect(changed?.bucket).toEqual(first?.bucket);
    expect(changed?.rule).toMatchObject({ requestsPerUnit: 42, unit: 'hour' });
    expect(request('something_else', { requestsPerUnit: 42, unit: 'hour' })?.statKey).toBe(
      'test-domain.key1_value1.subkey1_something_else',
    );
  });

  it('applies where nothing is configured, but not in an unknown domain', () => {
    const limit = { requestsPerUnit: 3, unit: 'hour' } as const;
    expect(limitOf(config, 'test-domain', [['unconfigured', '']], limit)?.statKey).toBe(
      'test-domain.unconfigured',
    );
    expect(limitOf(config, 'foo_domain', [['key2', 'x']], limit)).toBeUndefined();
  });

  it('is never in shadow mode, even over a shadow-mode limit', () => {
    const shadow = load(['shadow-mode.yaml']);
    const limit = limitOf(shadow, 'test-domain', [['key2', 'x']], {
      requestsPerUnit: 1,
      unit: 'day',
    });
    expect(limit?.shadowMode).toBe(false);
  });
});

describe("upstream's shadow mode configuration", () => {
  const config = load(['shadow-mode.yaml']);
  const get = (...pairs: Array<[string, string]>) => limitOf(config, 'test-domain', pairs);

  it('marks the limits configured with shadow_mode, and only those', () => {
    expect(get(['key1', 'value1'], ['subkey1', 'something'])).toMatchObject({
      shadowMode: false,
      statKey: 'test-domain.key1_value1.subkey1',
      rule: { requestsPerUnit: 5, unit: 'second' },
    });
    expect(get(['key1', 'value1'], ['subkey1', 'subvalue1'])).toMatchObject({
      shadowMode: true,
      statKey: 'test-domain.key1_value1.subkey1_subvalue1',
      rule: { requestsPerUnit: 10 },
    });
    expect(get(['key2', 'something'])).toMatchObject({
      shadowMode: true,
      statKey: 'test-domain.key2',
    });
    expect(get(['key2', 'value2'])).toMatchObject({
      shadowMode: false,
      rule: { requestsPerUnit: 30 },
    });
  });
});

describe("upstream's wildcard configuration", () => {
  const config = load(['wildcard.yaml']);
  const get = (...pairs: Array<[string, string]>) => limitOf(config, 'test-domain', pairs);

  it('names a key with no value by the key alone, whatever the value', () => {
    expect(get(['noVal', 'foo1'])?.statKey).toBe('test-domain.noVal');
    expect(get(['noVal', 'foo2'])?.statKey).toBe('test-domain.noVal');
  });

  it('matches a trailing wildcard, named by its pattern, each value in its own bucket', () => {
    expect(summary(get(['wild', 'foo1']))).toEqual({
      requestsPerUnit: 20,
      unit: 'minute',
      statKey: 'test-domain.wild_foo*',
    });
    expect(get(['wild', 'foo2'])?.statKey).toBe('test-domain.wild_foo*');
    expect(get(['wild', 'foo2'])?.bucket).toEqual(entries([['wild', 'foo2']]));
    expect(get(['wild', 'bar'])).toBeUndefined();
  });

  it('matches a wildcard one level down', () => {
    expect(get(['nestedWild', 'val1'], ['wild', 'goo2'])?.statKey).toBe(
      'test-domain.nestedWild_val1.wild_goo*',
    );
  });

  it('matches a value without a star exactly, never as a prefix', () => {
    expect(get(['noWild', 'foo1'])).toBeUndefined();
    expect(get(['noWild', 'foo'])?.statKey).toBe('test-domain.noWild_foo');
  });

  it('matches a wildcard in the middle, a star matching nothing too', () => {
    for (const value of ['barab', 'bar123b', 'barb']) {
      expect(get(['midWild', value])?.statKey).toBe('test-domain.midWild_bar*b');
    }
    expect(get(['midWild', 'bara'])).toBeUndefined();
    expect(get(['midWild', 'xbarb'])).toBeUndefined();
  });

  it('matches several wildcards, their literal parts in order', () => {
    expect(get(['multiWild', 'foo123bar456baz'])?.statKey).toBe(
      'test-domain.multiWild_foo*bar*baz',
    );
    expect(get(['multiWild', 'foobarbaz'])?.rule.requestsPerUnit).toBe(10);
    expect(get(['multiWild', 'foo123baz'])).toBeUndefined();
    expect(get(['multiWild', 'bar456baz'])).toBeUndefined();
    expect(get(['multiWild', 'foobazbar'])).toBeUndefined();
  });

  it('tries wildcards in the order configured, after the exact value and before the key alone', () => {
    const ordered = loadText(
      'domain: d\ndescriptors:\n' +
        '  - { key: k, rate_limit: { unit: second, requests_per_unit: 1 } }\n' +
        '  - { key: k, value: ab*, rate_limit: { unit: second, requests_per_unit: 2 } }\n' +
        '  - { key: k, value: a*, rate_limit: { unit: second, requests_per_unit: 3 } }\n' +
        '  - { key: k, value: abc, rate_limit: { unit: second, requests_per_unit: 4 } }\n',
    );
    const count = (value: string) => limitOf(ordered, 'd', [['k', value]])?.rule.requestsPerUnit;
    expect([count('abc'), count('abd'), count('axe'), count('zzz')]).toEqual([4, 2, 3, 1]);
  });
});

describe('replaces', () => {
  const config = loadText(`
domain: d
descriptors:
  - key: user
    rate_limit: { name: per_user, unit: second, requests_per_unit: 5 }
  - key: route
    value: upload
    rate_limit: { replaces: [{ name: per_user }], unit: second, requests_per_unit: 50 }
  - key: route
    value: free
    rate_limit: { unlimited: true, replaces: [{ name: per_user }] }
  - key: tenant
    rate_limit: { name: per_tenant, unlimited: true }
  - key: admin
    rate_limit: { replaces: [{ name: per_tenant }], unit: second, requests_per_unit: 9 }
  - key: a
    rate_limit: { name: a, replaces: [{ name: b }], unit: second, requests_per_unit: 1 }
  - key: b
    rate_limit: { name: b, replaces: [{ name: a }], unit: second, requests_per_unit: 1 }
`);
  const counts = (...descriptors: Array<[string, string]>) =>
    config
      .matchAll(
        'd',
        descriptors.map((pair) => ({ entries: entries([pair]) })),
      )
      .map((limit) =>
        limit === undefined
          ? undefined
          : limit.rule.unlimited
            ? 'unlimited'
            : limit.rule.requestsPerUnit,
      );

  it('drops a named limit that another descriptor of the request replaces', () => {
    expect(counts(['user', 'u1'])).toEqual([5]);
    expect(counts(['user', 'u1'], ['route', 'upload'])).toEqual([undefined, 50]);
    expect(counts(['route', 'upload'], ['user', 'u1'])).toEqual([50, undefined]);
  });

  it('lets an unlimited limit replace another', () => {
    expect(counts(['user', 'u1'], ['route', 'free'])).toEqual([undefined, 'unlimited']);
  });

  it('never drops an unlimited limit, as upstream answers it unlimited anyway', () => {
    expect(counts(['tenant', 't'], ['admin', 'x'])).toEqual(['unlimited', 9]);
  });

  it('drops both of two limits that replace each other', () => {
    expect(counts(['a', 'x'], ['b', 'x'])).toEqual([undefined, undefined]);
  });

  it('leaves the replaced limit whole in a request without its replacer', () => {
    expect(counts(['user', 'u1'], ['route', 'download'])).toEqual([5, undefined]);
  });
});

describe("upstream's metadata configuration", () => {
  const config = load(['metadata.yaml']);

  it('hands back the metadata of the limit matched', () => {
    const nested = limitOf(config, 'test-domain', [
      ['key1', 'value1'],
      ['subkey1', 'something'],
    ]);
    expect(nested).toMatchObject({
      statKey: 'test-domain.key1_value1.subkey1',
      metadata: { name: 'service_1' },
    });
    expect(limitOf(config, 'test-domain', [['key2', 'something']])?.metadata).toEqual({
      service_with_quota: { name: 'service_2' },
    });
    expect(
      limitOf(config, 'test-domain', [
        ['key1', 'value1'],
        ['subkey1', 'subvalue1'],
      ])?.metadata,
    ).toBeUndefined();
  });
});

describe("upstream's integration configurations", () => {
  const config = load([
    'integration/basic.yaml',
    'integration/another.yaml',
    'integration/share-threshold.yaml',
  ]);

  it('limits each key of basic and another by its own default', () => {
    expect(summary(limitOf(config, 'basic', [['key1', 'foo']]))).toEqual({
      requestsPerUnit: 50,
      unit: 'second',
      statKey: 'basic.key1',
    });
    expect(summary(limitOf(config, 'basic', [['one_per_minute', 'x']]))).toMatchObject({
      requestsPerUnit: 1,
      unit: 'minute',
    });
    expect(summary(limitOf(config, 'another', [['key3', 'x']]))).toEqual({
      requestsPerUnit: 10,
      unit: 'hour',
      statKey: 'another.key3',
    });
    expect(summary(limitOf(config, 'another', [['key4_local', 'x']]))).toMatchObject({
      requestsPerUnit: 20,
      unit: 'day',
    });
    expect(limitOf(config, 'basic', [['key2', 'x']])).toBeUndefined();
  });

  it('shares one bucket among the values of files/*, and none among those of files_no_share/*', () => {
    const shared = ['files/a.pdf', 'files/b.csv'].map((value) =>
      limitOf(config, 'share-threshold-test', [['files', value]]),
    );
    expect(shared.map((limit) => limit?.bucket)).toEqual([
      entries([['files', 'files/*']]),
      entries([['files', 'files/*']]),
    ]);
    expect(shared[0]?.statKey).toBe('share-threshold-test.files_files/*');
    const isolated = limitOf(config, 'share-threshold-test', [
      ['files_no_share', 'files_no_share/a.pdf'],
    ]);
    expect(isolated?.bucket).toEqual(entries([['files_no_share', 'files_no_share/a.pdf']]));
    expect(isolated?.statKey).toBe('share-threshold-test.files_no_share_files_no_share/*');
  });
});
