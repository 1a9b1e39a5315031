// Loading a configuration in envoyproxy/ratelimit's format: what it accepts, as its parser reads
// it, and what it refuses, each refusal naming the file and the field.
import { ConfigError, loadConfig } from '@sentinel/rls';
import { describe, expect, it } from 'vitest';
import { fixture, limitOf, load, loadText, summary } from './config-fixtures.ts';

/** The error loading throws; fails the test if it throws none. */
function refusal(load: () => unknown): ConfigError {
  try {
    load();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).message).not.toContain('\n');
    return error as ConfigError;
  }
  throw new Error('the configuration loaded');
}

describe('the configurations upstream accepts', () => {
  it.each([
    ['basic.yaml'],
    ['shadow-mode.yaml'],
    ['wildcard.yaml'],
    ['share-threshold.yaml'],
    ['metadata.yaml'],
    ['duplicate-domain.yaml'],
    ['integration/basic.yaml'],
    ['integration/another.yaml'],
    ['integration/share-threshold.yaml'],
  ])('loads %s', (name) => {
    expect(load([name]).domains).toHaveLength(1);
  });

  it('lists the domains of every file, in order', () => {
    const config = load(['integration/basic.yaml', 'integration/another.yaml']);
    expect(config.domains).toEqual(['basic', 'another']);
  });

  it('merges two files of one domain when asked, as MERGE_DOMAIN_CONFIG does', () => {
    const config = load(['merge-first.yaml', 'merge-second.yaml'], { mergeDomains: true });
    expect(config.domains).toEqual(['test-domain']);
    expect(summary(limitOf(config, 'test-domain', [['key1', 'value1']]))).toMatchObject({
      requestsPerUnit: 10,
    });
    expect(summary(limitOf(config, 'test-domain', [['key2', 'value2']]))).toMatchObject({
      requestsPerUnit: 20,
    });
  });
});

describe('the configurations upstream refuses', () => {
  it.each([
    ['bad-unit.yaml', 'descriptors[0].rate_limit.unit', "unknown unit 'fortnight'"],
    ['duplicate-key.yaml', 'descriptors[1]', "'test-domain.key1_value1' is already defined"],
    ['empty-domain.yaml', 'domain', 'missing or empty'],
    ['empty-key.yaml', 'descriptors[0].key', 'missing or empty'],
    [
      'misspelled-field.yaml',
      'descriptors[0].ratelimit',
      "unknown field (did you mean 'rate_limit'?)",
    ],
    [
      'misspelled-nested-field.yaml',
      'descriptors[0].rate_limit.requestsperunit',
      "unknown field (did you mean 'requests_per_unit'?)",
    ],
    ['non-map-list.yaml', 'descriptors[0]', "expected a map, found 'a'"],
    ['replaces-empty.yaml', 'descriptors[0].descriptors[0].rate_limit.replaces[0].name', 'missing'],
    [
      'replaces-self.yaml',
      'descriptors[0].descriptors[0].rate_limit.replaces[0].name',
      "'mine' is this limit's own name",
    ],
    ['unlimited-with-unit.yaml', 'descriptors[0].rate_limit.unit', 'not allowed with unlimited'],
  ])('refuses %s, naming %s', (name, field, problem) => {
    const error = refusal(() => load([name]));
    expect(error.message).toMatch(new RegExp(`^fixtures/config/${name}: ${escapeRegExp(field)}: `));
    expect(error.field).toBe(field);
    expect(error.problem).toContain(problem);
  });

  it('refuses a file that is not YAML, naming the line', () => {
    // Upstream's bad_yaml.yaml, inline: the linter parses the YAML files it finds in the tree.
    const error = refusal(() => loadConfig([{ path: 'config/bad.yaml', text: "'''\n" }]));
    expect(error.message).toBe(
      "config/bad.yaml: line 2, column 1: invalid YAML: Missing closing 'quote",
    );
  });

  it('refuses a field name that is not a string, naming it', () => {
    const error = refusal(() => load(['non-string-key.yaml']));
    expect(error.message).toBe(
      'fixtures/config/non-string-key.yaml: field name 0.25 is not a string',
    );
  });

  it('refuses a domain already in another file, naming both files', () => {
    const error = refusal(() => load(['basic.yaml', 'duplicate-domain.yaml']));
    expect(error.message).toMatch(
      /^fixtures\/config\/duplicate-domain\.yaml: domain: 'test-domain'/,
    );
    expect(error.message).toContain('already defined in fixtures/config/basic.yaml');
  });

  it('refuses, even merging, a descriptor that two files of a domain both define', () => {
    const error = refusal(() =>
      loadConfig([fixture('merge-first.yaml'), fixture('merge-first.yaml')], {
        mergeDomains: true,
      }),
    );
    expect(error.message).toBe(
      "fixtures/config/merge-first.yaml: descriptors[0]: descriptor 'test-domain.key1_value1' is already defined",
    );
  });

  it('joins key and value as upstream keys them, so key a_b and key a with value b are one', () => {
    const error = refusal(() =>
      loadText('domain: d\ndescriptors:\n  - { key: a_b }\n  - { key: a, value: b }\n'),
    );
    expect(error.message).toBe(
      "inline.yaml: descriptors[1]: descriptor 'd.a_b' is already defined",
    );
    // An empty value is no value.
    expect(() =>
      loadText('domain: d\ndescriptors:\n  - { key: a }\n  - { key: a, value: "" }\n'),
    ).toThrow("descriptor 'd.a' is already defined");
  });

  it('reads every file before it checks any descriptor, so a misspelt field comes first', () => {
    const error = refusal(() => load(['bad-unit.yaml', 'misspelled-field.yaml']));
    expect(error.source).toBe('fixtures/config/misspelled-field.yaml');
  });
});

describe('fields as upstream reads them', () => {
  const limit = (body: string) => `domain: d\ndescriptors:\n  - key: k\n${body}`;

  it('takes units in any case', () => {
    const config = loadText(limit('    rate_limit: { unit: Minute, requests_per_unit: 3 }'));
    expect(summary(limitOf(config, 'd', [['k', 'x']]))).toMatchObject({ unit: 'minute' });
  });

  it.each([
    ['week', 604_800_000],
    ['month', 2_592_000_000],
    ['year', 31_536_000_000],
  ])('counts a %s as upstream does, in %d ms', (unit, windowMs) => {
    const config = loadText(limit(`    rate_limit: { unit: ${unit}, requests_per_unit: 1 }`));
    expect(limitOf(config, 'd', [['k', 'x']])?.rule.windowMs).toBe(windowMs);
  });

  it('reads a missing requests_per_unit as a limit of 0, as upstream does', () => {
    const config = loadText(limit('    rate_limit: { unit: second }'));
    expect(limitOf(config, 'd', [['k', 'x']])?.rule.requestsPerUnit).toBe(0);
  });

  it('refuses a rate_limit with no unit', () => {
    const error = refusal(() => loadText(limit('    rate_limit: { requests_per_unit: 1 }')));
    expect(error.message).toMatch(/^inline\.yaml: descriptors\[0\]\.rate_limit\.unit: missing/);
  });

  it('lets a meaningless unit beside unlimited pass, as upstream does', () => {
    const config = loadText(limit('    rate_limit: { unlimited: true, unit: fortnight }'));
    expect(limitOf(config, 'd', [['k', 'x']])?.rule.unlimited).toBe(true);
  });

  it('reads a plain value as written: a leading zero, a hex number, a YAML 1.1 boolean', () => {
    const config = loadText(
      'domain: d\ndescriptors:\n' +
        '  - { key: zip, value: 0123, rate_limit: { unit: second, requests_per_unit: 1 } }\n' +
        '  - { key: id, value: 0x1F, rate_limit: { unit: second, requests_per_unit: 2 } }\n' +
        '  - { key: flag, value: yes, rate_limit: { unit: second, requests_per_unit: 3 } }\n' +
        '  - { key: when, value: 12:30, rate_limit: { unit: second, requests_per_unit: 4 } }\n',
    );
    expect(limitOf(config, 'd', [['zip', '0123']])?.rule.requestsPerUnit).toBe(1);
    expect(limitOf(config, 'd', [['zip', '83']])).toBeUndefined();
    expect(limitOf(config, 'd', [['id', '0x1F']])?.rule.requestsPerUnit).toBe(2);
    expect(limitOf(config, 'd', [['flag', 'yes']])?.rule.requestsPerUnit).toBe(3);
    expect(limitOf(config, 'd', [['when', '12:30']])?.rule.requestsPerUnit).toBe(4);
  });

  it('refuses a number with a fraction anywhere but in metadata', () => {
    const error = refusal(() =>
      loadText('domain: d\ndescriptors:\n  - { key: version, value: 1.5 }'),
    );
    expect(error.message).toBe(
      'inline.yaml: descriptors[0].value: 1.5 is not a whole number (quote it if it is a string)',
    );
    expect(() =>
      loadText('domain: d\ndescriptors:\n  - { key: version, metadata: { weight: 1.5 } }'),
    ).not.toThrow();
  });

  it.each([
    ['    rate_limit: { unit: second, requests_per_unit: "5" }', 'rate_limit.requests_per_unit'],
    ['    rate_limit: { unit: second, requests_per_unit: -1 }', 'rate_limit.requests_per_unit'],
    [
      '    rate_limit: { unit: second, requests_per_unit: 4294967296 }',
      'rate_limit.requests_per_unit',
    ],
    ['    shadow_mode: "true"', 'shadow_mode'],
    ['    rate_limit: [a]', 'rate_limit[0]'],
    ['    rate_limit: 5', 'rate_limit'],
    ['    descriptors: { key: x }', 'descriptors'],
    ['    metadata: 5', 'metadata'],
    ['    value: [a, b]', 'value[0]'],
  ])('refuses a field of the wrong type: %s', (body, field) => {
    expect(refusal(() => loadText(limit(body))).field).toBe(`descriptors[0].${field}`);
  });

  it('takes yes and on for true, as YAML 1.1 does', () => {
    const config = loadText(
      limit('    shadow_mode: yes\n    rate_limit: { unit: second, requests_per_unit: 1 }'),
    );
    expect(limitOf(config, 'd', [['k', 'x']])?.shadowMode).toBe(true);
  });

  it('resolves anchors and << merges', () => {
    const config = loadText(
      'domain: d\n' +
        'descriptors:\n' +
        '  - key: a\n' +
        '    rate_limit: &shared { unit: hour, requests_per_unit: 7 }\n' +
        '  - key: b\n' +
        '    rate_limit:\n' +
        '      <<: *shared\n' +
        '      requests_per_unit: 8\n',
    );
    expect(summary(limitOf(config, 'd', [['a', 'x']]))).toMatchObject({
      requestsPerUnit: 7,
      unit: 'hour',
    });
    expect(summary(limitOf(config, 'd', [['b', 'x']]))).toMatchObject({
      requestsPerUnit: 8,
      unit: 'hour',
    });
  });

  it('ignores a known field where it does not belong, as upstream does', () => {
    const config = loadText(
      limit('    unit: day\n    rate_limit: { unit: second, requests_per_unit: 1, key: z }'),
    );
    expect(summary(limitOf(config, 'd', [['k', 'x']]))).toMatchObject({ unit: 'second' });
  });

  it('keeps the last value of a field written twice, as upstream does', () => {
    const config = loadText(
      limit('    rate_limit: { unit: second, unit: hour, requests_per_unit: 1 }'),
    );
    expect(limitOf(config, 'd', [['k', 'x']])?.rule.unit).toBe('hour');
  });

  it('reads the first document of a file only, as upstream does', () => {
    const config = loadText('domain: first\n---\ndomain: second\n');
    expect(config.domains).toEqual(['first']);
  });

  it('refuses an alias that contains itself, and a file of nested aliases that never ends', () => {
    expect(refusal(() => loadText('domain: d\nmetadata: &m { inner: *m }\n')).problem).toMatch(
      /loops/,
    );
    const row = (alias: string) => `[${Array(10).fill(alias).join(', ')}]`;
    const bomb = `a: &a ${row('x')}\nb: &b ${row('*a')}\nc: &c ${row('*b')}\nd: &d ${row('*c')}\ne: ${row('*d')}\n`;
    expect(refusal(() => loadText(bomb)).problem).toBe('invalid YAML: more than 10000 aliases');
  });

  it('refuses a file that is not a map', () => {
    expect(refusal(() => loadText('- a\n- b\n')).message).toBe(
      'inline.yaml: expected a map of domain and descriptors, found a list',
    );
  });

  it('refuses share_threshold on a value with no wildcard', () => {
    const error = refusal(() =>
      loadText('domain: d\ndescriptors:\n  - { key: k, value: v, share_threshold: true }'),
    );
    expect(error.message).toBe(
      "inline.yaml: descriptors[0].share_threshold: needs a wildcard value (one containing '*'), found 'k_v'",
    );
  });

  it('accepts quota_mode and value_to_metric, which upstream accepts too', () => {
    const config = loadText(
      limit(
        '    quota_mode: true\n    value_to_metric: true\n    rate_limit: { unit: second, requests_per_unit: 1 }',
      ),
    );
    expect(limitOf(config, 'd', [['k', 'x']])).toMatchObject({ quotaMode: true, statKey: 'd.k_x' });
  });
});

describe("Sentinel's extensions", () => {
  const limit = (fields: string) =>
    `domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: minute, requests_per_unit: 5${fields} }\n`;

  it('counts a window of unit_multiplier units', () => {
    const rule = limitOf(loadText(limit(', unit_multiplier: 10')), 'd', [['k', 'x']])?.rule;
    expect(rule).toMatchObject({ unit: 'minute', unitMultiplier: 10, windowMs: 600_000 });
  });

  it('defaults to one unit and a fixed window', () => {
    const rule = limitOf(loadText(limit('')), 'd', [['k', 'x']])?.rule;
    expect(rule).toMatchObject({ unitMultiplier: 1, windowMs: 60_000, algorithm: 'fixed-window' });
  });

  it.each(['token-bucket', 'gcra', 'fixed-window', 'sliding-window-counter', 'sliding-window-log'])(
    'takes the algorithm %s',
    (algorithm) => {
      const rule = limitOf(loadText(limit(`, algorithm: ${algorithm}`)), 'd', [['k', 'x']])?.rule;
      expect(rule?.algorithm).toBe(algorithm);
    },
  );

  it.each([
    [', unit_multiplier: 0', 'unit_multiplier', 'expected a whole number of at least 1, found 0'],
    [', unit_multiplier: -2', 'unit_multiplier', 'found -2'],
    [', unit_multiplier: 1.5', 'unit_multiplier', '1.5 is not a whole number'],
    [', unit_multiplier: ten', 'unit_multiplier', "found 'ten'"],
    [', unit_multiplier: 9007199254740991', 'unit_multiplier', 'too long a window'],
    [
      ', algorithm: leaky-bucket',
      'algorithm',
      "unknown algorithm 'leaky-bucket' (expected token-bucket,",
    ],
    [', algorithm: GCRA', 'algorithm', "unknown algorithm 'GCRA'"],
  ])('refuses %s', (fields, field, problem) => {
    const error = refusal(() => loadText(limit(fields)));
    expect(error.message).toMatch(
      new RegExp(`^inline\\.yaml: descriptors\\[0\\]\\.rate_limit\\.${field}: `),
    );
    expect(error.problem).toContain(problem);
  });

  it.each(['unit_multiplier: 2', 'algorithm: gcra'])('refuses %s beside unlimited', (field) => {
    const error = refusal(() =>
      loadText(
        `domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unlimited: true, ${field} }\n`,
      ),
    );
    expect(error.problem).toBe('not allowed with unlimited: true');
  });
});

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
