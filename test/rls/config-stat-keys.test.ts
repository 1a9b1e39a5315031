// How a matched limit names its statistics and its bucket, as envoyproxy/ratelimit's tests pin
// them: detailed_metric, value_to_metric, and share_threshold's one bucket for a wildcard.
import { describe, expect, it } from 'vitest';
import { entries, limitOf, load, loadText } from './config-fixtures.ts';

describe('detailed_metric', () => {
  const nested = (outer: boolean, inner: boolean) =>
    loadText(`
domain: nested
descriptors:
  - key: key-1
    detailed_metric: ${outer}
    rate_limit: { unit: minute, requests_per_unit: 100 }
    descriptors:
      - key: key-2
        detailed_metric: ${inner}
        rate_limit: { unit: minute, requests_per_unit: 5 }
`);

  it.each([
    [true, false, [['key-1', 'value-1']], 'nested.key-1_value-1'],
    [false, false, [['key-1', 'value-1']], 'nested.key-1'],
    [
      true,
      true,
      [
        ['key-1', 'value-1'],
        ['key-2', 'value-2'],
      ],
      'nested.key-1_value-1.key-2_value-2',
    ],
    [
      false,
      false,
      [
        ['key-1', 'value-1'],
        ['key-2', 'value-2'],
      ],
      'nested.key-1.key-2',
    ],
  ] as const)('with it %s above and %s below, names %j %s', (outer, inner, pairs, statKey) => {
    expect(limitOf(nested(outer, inner), 'nested', pairs)?.statKey).toBe(statKey);
  });

  // Upstream's "realistic" nested example.
  const realistic = loadText(`
domain: nested
descriptors:
  - key: key_1
    detailed_metric: true
    rate_limit: { unit: minute, requests_per_unit: 500 }
  - key: key_1
    value: some-value-for-key-1
    rate_limit: { unit: minute, requests_per_unit: 500 }
  - key: key_2
    detailed_metric: true
    rate_limit: { unit: minute, requests_per_unit: 5000 }
    descriptors:
      - key: key_3
        detailed_metric: true
      - key: key_3
        value: requested-key3-value
        detailed_metric: true
        rate_limit: { unit: minute, requests_per_unit: 5 }
  - key: key_2
    value: specific-id
    detailed_metric: true
    rate_limit: { unit: minute, requests_per_unit: 50000 }
    descriptors:
      - key: key_3
        detailed_metric: true
      - key: key_3
        value: requested-key3-value
        detailed_metric: true
        rate_limit: { unit: minute, requests_per_unit: 100 }
`);

  it.each([
    [[['key_1', 'value-for-key-1']], 'nested.key_1_value-for-key-1', 500],
    [[['key_2', 'key-2-value']], 'nested.key_2_key-2-value', 5000],
    [
      [
        ['key_2', 'key-2-value'],
        ['key_3', 'requested-key3-value'],
      ],
      'nested.key_2_key-2-value.key_3_requested-key3-value',
      5,
    ],
    [
      [
        ['key_2', 'specific-id'],
        ['key_3', 'requested-key3-value'],
      ],
      'nested.key_2_specific-id.key_3_requested-key3-value',
      100,
    ],
  ] as const)('names %j %s in the nested example', (pairs, statKey, requestsPerUnit) => {
    const limit = limitOf(realistic, 'nested', pairs);
    expect(limit?.statKey).toBe(statKey);
    expect(limit?.rule.requestsPerUnit).toBe(requestsPerUnit);
  });

  it('writes an empty value as `key_`, as upstream does', () => {
    const config = loadText(
      'domain: d\ndescriptors:\n  - { key: k, detailed_metric: true, rate_limit: { unit: second, requests_per_unit: 1 } }',
    );
    expect(limitOf(config, 'd', [['k', '']])?.statKey).toBe('d.k_');
  });
});

describe('value_to_metric', () => {
  const chain = (route: string, method: string, leaf = '') =>
    loadText(`
domain: domain
descriptors:
  - key: route
    ${route}
    descriptors:
      - key: http_method
        ${method}
        descriptors:
          - key: subject_id
            ${leaf}
            rate_limit: { unit: minute, requests_per_unit: 60 }
`);
  const request = [
    ['route', 'draw'],
    ['http_method', 'GET'],
    ['subject_id', '123'],
  ] as const;

  it('puts the values sent into the name where the flag is set', () => {
    const config = chain('value_to_metric: true', 'value_to_metric: true');
    expect(limitOf(config, 'domain', request)?.statKey).toBe(
      'domain.route_draw.http_method_GET.subject_id',
    );
  });

  it('puts them only at the levels that set it', () => {
    const config = chain('', 'value_to_metric: true');
    expect(limitOf(config, 'domain', request)?.statKey).toBe(
      'domain.route.http_method_GET.subject_id',
    );
    expect(limitOf(chain('', ''), 'domain', request)?.statKey).toBe(
      'domain.route.http_method.subject_id',
    );
  });

  it('gives way to detailed_metric at the leaf', () => {
    const config = chain('value_to_metric: true', 'value_to_metric: true', 'detailed_metric: true');
    expect(limitOf(config, 'domain', request)?.statKey).toBe(
      'domain.route_draw.http_method_GET.subject_id_123',
    );
  });

  it('writes an empty value without its underscore', () => {
    const config = chain('value_to_metric: true', 'value_to_metric: true');
    const named = (route: string, method: string) =>
      limitOf(config, 'domain', [
        ['route', route],
        ['http_method', method],
        ['subject_id', '1'],
      ])?.statKey;
    expect(named('', 'GET')).toBe('domain.route.http_method_GET.subject_id');
    expect(named('draw', '')).toBe('domain.route_draw.http_method.subject_id');
    expect(named('', '')).toBe('domain.route.http_method.subject_id');
  });

  it('keeps a configured value, and puts the full value a wildcard matched', () => {
    const config = loadText(`
domain: domain
descriptors:
  - key: user
    value_to_metric: true
    descriptors:
      - key: action
        value: read*
        value_to_metric: true
        descriptors:
          - key: resource
            rate_limit: { unit: minute, requests_per_unit: 100 }
      - key: action
        value: GET
        value_to_metric: true
        descriptors:
          - key: resource
            rate_limit: { unit: minute, requests_per_unit: 60 }
`);
    const named = (pairs: ReadonlyArray<readonly [string, string]>) =>
      limitOf(config, 'domain', pairs)?.statKey;
    expect(
      named([
        ['user', 'alice'],
        ['action', 'readfile'],
        ['resource', 'docs'],
      ]),
    ).toBe('domain.user_alice.action_readfile.resource');
    expect(
      named([
        ['user', 'bob'],
        ['action', 'GET'],
        ['resource', 'x'],
      ]),
    ).toBe('domain.user_bob.action_GET.resource');
  });

  it('leaves a wildcard above it named by its pattern', () => {
    const config = loadText(`
domain: test-domain
descriptors:
  - key: wild
    value: foo*
    descriptors:
      - key: other
        value_to_metric: true
        descriptors:
          - key: limit
            rate_limit: { unit: minute, requests_per_unit: 20 }
`);
    expect(
      limitOf(config, 'test-domain', [
        ['wild', 'foo1'],
        ['other', 'bar'],
        ['limit', 'X'],
      ])?.statKey,
    ).toBe('test-domain.wild_foo*.other_bar.limit');
  });

  it.each([
    ['foo*', '', 'foo1', 'test-domain.wild_foo*'],
    ['foo*', 'value_to_metric: true', 'foo1', 'test-domain.wild_foo1'],
    ['foo*', 'share_threshold: true', 'foo1', 'test-domain.wild_foo*'],
    ['foo*', 'share_threshold: true\n    value_to_metric: true', 'foo1', 'test-domain.wild_foo*'],
    ['foo*bar*', '', 'foo123bar456', 'test-domain.wild_foo*bar*'],
    ['foo*bar*', 'value_to_metric: true', 'foo123bar456', 'test-domain.wild_foo123bar456'],
  ])('names wildcard %s with %j, for %s, %s', (pattern, flags, value, statKey) => {
    const config = loadText(`
domain: test-domain
descriptors:
  - key: wild
    value: ${pattern}
    ${flags}
    rate_limit: { unit: minute, requests_per_unit: 20 }
`);
    expect(limitOf(config, 'test-domain', [['wild', value]])?.statKey).toBe(statKey);
  });
});

describe("upstream's share_threshold configuration", () => {
  const config = load(['share-threshold.yaml']);
  const get = (...pairs: Array<[string, string]>) => limitOf(config, 'test-domain', pairs);

  it('counts every value of files/* in one bucket, named by the pattern', () => {
    for (const value of ['files/a.pdf', 'files/b.csv', 'files/c.txt']) {
      const limit = get(['files', value]);
      expect(limit?.bucket).toEqual(entries([['files', 'files/*']]));
      expect(limit?.statKey).toBe('test-domain.files_files/*');
      expect(limit?.rule.requestsPerUnit).toBe(100);
    }
  });

  it('overrides value_to_metric and detailed_metric with the pattern', () => {
    const route = get(['route', 'api/v1'], ['method', 'GET']);
    expect(route?.statKey).toBe('test-domain.route_api/*.method');
    expect(route?.bucket).toEqual(
      entries([
        ['route', 'api/*'],
        ['method', 'GET'],
      ]),
    );
    const service = get(['service', 'svc/user'], ['endpoint', 'get']);
    expect(service?.detailedMetric).toBe(true);
    expect(service?.statKey).toBe('test-domain.service_svc/*.endpoint_get');
    expect(service?.bucket).toEqual(
      entries([
        ['service', 'svc/*'],
        ['endpoint', 'get'],
      ]),
    );
  });

  it('shares at a nested level, and at each of two levels with the same key', () => {
    const nested = get(['nested', 'parent'], ['files', 'nested/file1.txt']);
    expect(nested?.rule.requestsPerUnit).toBe(200);
    expect(nested?.statKey).toBe('test-domain.nested_parent.files_nested/*');
    expect(nested?.bucket).toEqual(
      entries([
        ['nested', 'parent'],
        ['files', 'nested/*'],
      ]),
    );
    const twice = get(['files', 'top/file1.txt'], ['files', 'nested/file1.txt']);
    expect(twice?.rule.requestsPerUnit).toBe(300);
    expect(twice?.statKey).toBe('test-domain.files_top/*.files_nested/*');
    expect(twice?.bucket).toEqual(
      entries([
        ['files', 'top/*'],
        ['files', 'nested/*'],
      ]),
    );
  });

  it('shares only the levels that set it', () => {
    const mixed = get(['path', 'path/foo'], ['file', 'file/doc1'], ['type', 'pdf']);
    expect(mixed?.statKey).toBe('test-domain.path_path/*.file_file/*.type');
    expect(mixed?.bucket).toEqual(
      entries([
        ['path', 'path/*'],
        ['file', 'file/doc1'],
        ['type', 'pdf'],
      ]),
    );
    const both = get(['user', 'user/alice'], ['resource', 'res/file1'], ['action', 'read']);
    expect(both?.statKey).toBe('test-domain.user_user/*.resource_res/*.action');
    expect(both?.bucket).toEqual(
      entries([
        ['user', 'user/*'],
        ['resource', 'res/*'],
        ['action', 'read'],
      ]),
    );
  });

  it('leaves an exact value its own bucket beside a sharing wildcard', () => {
    const exact = get(['file', 'test1']);
    expect(exact?.rule.requestsPerUnit).toBe(50);
    expect(exact?.statKey).toBe('test-domain.file_test1');
    expect(exact?.bucket).toEqual(entries([['file', 'test1']]));
    for (const value of ['test2', 'test23', 'test123']) {
      const shared = get(['file', value]);
      expect(shared?.rule.requestsPerUnit).toBe(100);
      expect(shared?.statKey).toBe('test-domain.file_test*');
      expect(shared?.bucket).toEqual(entries([['file', 'test*']]));
    }
  });

  it('shares under middle and multiple wildcards, before value_to_metric', () => {
    for (const value of ['/api/v1', '/api-beta-v1', '/apiXYZv1']) {
      expect(get(['midpath', value])?.bucket).toEqual(entries([['midpath', '/api*v1']]));
      expect(get(['midpath', value])?.statKey).toBe('test-domain.midpath_/api*v1');
    }
    expect(get(['midpath', '/api/v2'])).toBeUndefined();
    for (const value of ['svcAepBrpc', 'svcXXXepYYYrpc', 'svceprpc']) {
      expect(get(['multiroute', value])?.statKey).toBe('test-domain.multiroute_svc*ep*rpc');
    }
    expect(get(['multiroute', 'svcABCrpc'])).toBeUndefined();
    expect(get(['midroute', '/api/v2'])?.statKey).toBe('test-domain.midroute_/api*v2');
    expect(get(['midroute', '/api-beta-v2'])?.bucket).toEqual(entries([['midroute', '/api*v2']]));
  });

  it('shares under nested middle wildcards', () => {
    for (const [tenant, resource] of [
      ['t1prod', 'resAv2'],
      ['t99prod', 'resBBBv2'],
    ] as const) {
      const limit = get(['tenant', tenant], ['resource', resource]);
      expect(limit?.statKey).toBe('test-domain.tenant_t*prod.resource_res*v2');
      expect(limit?.bucket).toEqual(
        entries([
          ['tenant', 't*prod'],
          ['resource', 'res*v2'],
        ]),
      );
    }
  });
});
