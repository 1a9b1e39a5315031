// The examples of envoyproxy/ratelimit's README, "Configuration" section, each as it says it
// matches.
import { describe, expect, it } from 'vitest';
import { entries, limitOf, loadText } from './config-fixtures.ts';

const counts = (
  config: ReturnType<typeof loadText>,
  domain: string,
  ...descriptors: Array<Array<[string, string]>>
) =>
  config
    .matchAll(
      domain,
      descriptors.map((pairs) => ({ entries: entries(pairs) })),
    )
    .map((limit) => limit && `${limit.rule.requestsPerUnit}/${limit.rule.unit}`);

describe("upstream README's examples", () => {
  it('1: two values of one key, each with its limit', () => {
    const config = loadText(`
domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit: { unit: second, requests_per_unit: 500 }
  - key: database
    value: default
    rate_limit: { unit: second, requests_per_unit: 500 }
`);
    expect(
      counts(
        config,
        'mongo_cps',
        [['database', 'users']],
        [['database', 'default']],
        [['database', 'logs']],
      ),
    ).toEqual(['500/second', '500/second', undefined]);
  });

  it('2: a nested limit per number for marketing, beside a limit per number for all', () => {
    const config = loadText(`
domain: messaging
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit: { unit: day, requests_per_unit: 5 }
  - key: to_number
    rate_limit: { unit: day, requests_per_unit: 100 }
`);
    const marketing = (number: string): Array<[string, string]> => [
      ['message_type', 'marketing'],
      ['to_number', number],
    ];
    expect(
      counts(config, 'messaging', marketing('2061111111'), [['to_number', '2061111111']]),
    ).toEqual(['5/day', '100/day']);
    const [first, second] = ['2061111111', '2062222222'].map((n) =>
      limitOf(config, 'messaging', marketing(n)),
    );
    expect(first?.bucket).not.toEqual(second?.bucket);
    expect(first?.statKey).toBe('messaging.message_type_marketing.to_number');
  });

  it('3: the most specific match: a blocked address beside the default', () => {
    const config = loadText(`
domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit: { unit: second, requests_per_unit: 10 }
  - key: remote_address
    value: 50.0.0.5
    rate_limit: { unit: second, requests_per_unit: 0 }
`);
    expect(
      counts(
        config,
        'edge_proxy_per_ip',
        [['remote_address', '50.0.0.1']],
        [['remote_address', '50.0.0.5']],
      ),
    ).toEqual(['10/second', '0/second']);
  });

  it('4: a request matches only at its own depth', () => {
    const request: Array<[string, string]> = [
      ['key', 'value'],
      ['subkey', 'subvalue'],
    ];
    const shallow = loadText(`
domain: example4
descriptors:
  - key: key
    value: value
    rate_limit: { requests_per_unit: 300, unit: second }
`);
    const deep = loadText(`
domain: example4
descriptors:
  - key: key
    value: value
    descriptors:
      - key: subkey
        rate_limit: { requests_per_unit: 300, unit: second }
`);
    expect(counts(shallow, 'example4', request)).toEqual([undefined]);
    expect(counts(deep, 'example4', request)).toEqual(['300/second']);
  });

  it('5: an unlimited descriptor beside a limited one', () => {
    const config = loadText(`
domain: internal
descriptors:
  - key: ldap
    rate_limit: { unlimited: true }
  - key: azure
    rate_limit: { unit: minute, requests_per_unit: 100 }
`);
    expect(limitOf(config, 'internal', [['ldap', 'x']])?.rule.unlimited).toBe(true);
    expect(limitOf(config, 'internal', [['azure', 'x']])?.rule).toMatchObject({
      unlimited: false,
      requestsPerUnit: 100,
    });
  });

  it('6: one user in shadow mode, the other enforced', () => {
    const config = loadText(`
domain: example6
descriptors:
  - key: service
    descriptors:
      - key: user
        value: user-a
        rate_limit: { requests_per_unit: 10, unit: second }
        shadow_mode: true
      - key: user
        value: user-b
        rate_limit: { requests_per_unit: 20, unit: second }
`);
    const user = (name: string) =>
      limitOf(config, 'example6', [
        ['service', 'auth-service'],
        ['user', name],
      ]);
    expect(user('user-a')).toMatchObject({ shadowMode: true, rule: { requestsPerUnit: 10 } });
    expect(user('user-b')).toMatchObject({ shadowMode: false, rule: { requestsPerUnit: 20 } });
  });

  it('7: a limit that replaces another applies alone when both match', () => {
    const config = loadText(`
domain: example7
descriptors:
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        value: bkthomps
        rate_limit: { name: specific_limit, requests_per_unit: 5, unit: second }
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          replaces:
            - name: specific_limit
          requests_per_unit: 10
          unit: second
`);
    const one: Array<[string, string]> = [
      ['key_1', 'value_1'],
      ['user', 'bkthomps'],
    ];
    const two: Array<[string, string]> = [
      ['key_2', 'value_2'],
      ['user', 'bkthomps'],
    ];
    expect(counts(config, 'example7', one)).toEqual(['5/second']);
    expect(counts(config, 'example7', two)).toEqual(['10/second']);
    expect(counts(config, 'example7', one, two)).toEqual([undefined, '10/second']);
  });

  it('8: detailed_metric names each unlisted value in the statistics', () => {
    const config = loadText(`
domain: example8
descriptors:
  - key: key1
    detailed_metric: true
    rate_limit: { unit: minute, requests_per_unit: 10 }
  - key: key1
    value: value1
    rate_limit: { unit: minute, requests_per_unit: 20 }
`);
    const named = (value: string) => limitOf(config, 'example8', [['key1', value]])?.statKey;
    expect([named('unspecified_value'), named('unspecified_value2'), named('value1')]).toEqual([
      'example8.key1_unspecified_value',
      'example8.key1_unspecified_value2',
      'example8.key1_value1',
    ]);
  });

  it('9: a star anywhere in a value, each matching any run of characters', () => {
    const config = loadText(`
domain: example9
descriptors:
  - key: key1
    value: value*
    rate_limit: { unit: minute, requests_per_unit: 20 }
  - key: path
    value: /api/*/action
    rate_limit: { unit: minute, requests_per_unit: 20 }
  - key: route
    value: /api/*/resource/*/action
    rate_limit: { unit: minute, requests_per_unit: 20 }
`);
    const matches = (key: string, value: string) =>
      limitOf(config, 'example9', [[key, value]]) !== undefined;
    expect(['value1', 'value2', 'valueXYZ'].map((v) => matches('key1', v))).toEqual([
      true,
      true,
      true,
    ]);
    expect(matches('path', '/api/123/action')).toBe(true);
    expect(matches('path', '/api/user-id/action')).toBe(true);
    expect(matches('path', '/api/123/other')).toBe(false);
    expect(matches('route', '/api/v1/resource/123/action')).toBe(true);
    expect(matches('route', '/api/v2/resource/456/action')).toBe(true);
    expect(matches('route', '/api/v2/resource/456')).toBe(false);
  });

  it('10: value_to_metric puts the values sent into the statistics', () => {
    const config = loadText(`
domain: example10
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit: { unit: minute, requests_per_unit: 60 }
`);
    const named = (route: string, method: string, subject: string) =>
      limitOf(config, 'example10', [
        ['route', route],
        ['http_method', method],
        ['subject_id', subject],
      ])?.statKey;
    expect(named('api', 'GET', '123')).toBe('example10.route_api.http_method_GET.subject_id');
    expect(named('web', 'POST', '456')).toBe('example10.route_web.http_method_POST.subject_id');
    const wildcard = loadText(`
domain: example10_wildcard
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
`);
    expect(
      limitOf(wildcard, 'example10_wildcard', [
        ['user', 'alice'],
        ['action', 'readfile'],
        ['resource', 'documents'],
      ])?.statKey,
    ).toBe('example10_wildcard.user_alice.action_readfile.resource');
  });

  it('11: share_threshold counts every files/* value in one bucket', () => {
    const config = loadText(`
domain: example11
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: { unit: hour, requests_per_unit: 10 }
  - key: files_no_share
    value: files_no_share/*
    share_threshold: false
    rate_limit: { unit: hour, requests_per_unit: 10 }
`);
    const bucket = (key: string, value: string) =>
      limitOf(config, 'example11', [[key, value]])?.bucket;
    expect(bucket('files', 'files/a.pdf')).toEqual(bucket('files', 'files/c.txt'));
    expect(bucket('files_no_share', 'files_no_share/a.pdf')).not.toEqual(
      bucket('files_no_share', 'files_no_share/b.csv'),
    );
  });

  it('11: share_threshold names the statistics by the whole pattern, as the code does', () => {
    // The README shows `example11_metrics.route_api.method_GET`; upstream's code and tests give
    // the pattern with its star, and no value for `method`, which names none.
    const config = loadText(`
domain: example11_metrics
descriptors:
  - key: route
    value: api/*
    share_threshold: true
    value_to_metric: true
    descriptors:
      - key: method
        rate_limit: { unit: minute, requests_per_unit: 60 }
`);
    expect(
      limitOf(config, 'example11_metrics', [
        ['route', 'api/v1'],
        ['method', 'GET'],
      ])?.statKey,
    ).toBe('example11_metrics.route_api/*.method');
  });
});
