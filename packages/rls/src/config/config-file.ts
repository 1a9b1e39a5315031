// One configuration file, read as envoyproxy/ratelimit reads it: every field name checked
// anywhere in the file, then each field of the format read with its type.
import { ALGORITHMS, type Algorithm } from '@sentinel/core';
import { ConfigError } from './config-error.ts';
import { parseYaml, type YamlMap, type YamlValue } from './yaml-tree.ts';

/** A file's `domain` and its descriptors, typed but not yet checked against each other. */
export interface FileSpec {
  readonly path: string;
  readonly domain: string;
  readonly descriptors: readonly DescriptorSpec[];
}

export interface DescriptorSpec {
  /** Where it is written, as `descriptors[0].descriptors[1]`: what errors name. */
  readonly at: string;
  readonly key: string;
  /** '' where none is written, as upstream reads a missing string. */
  readonly value: string;
  readonly rateLimit: RateLimitSpec | undefined;
  readonly descriptors: readonly DescriptorSpec[];
  readonly shadowMode: boolean;
  readonly quotaMode: boolean;
  readonly detailedMetric: boolean;
  readonly valueToMetric: boolean;
  readonly shareThreshold: boolean;
  readonly metadata: Readonly<Record<string, unknown>> | undefined;
}

export interface RateLimitSpec {
  readonly at: string;
  /** As written; '' where none is. */
  readonly unit: string;
  /** 0 where none is written: upstream reads a missing count as a limit of zero. */
  readonly requestsPerUnit: number;
  readonly unlimited: boolean;
  readonly name: string;
  readonly replaces: readonly string[];
  readonly unitMultiplier: number | undefined;
  readonly algorithm: Algorithm | undefined;
}

/**
 * Upstream's field names, accepted at any depth (one it does not expect where it stands is
 * ignored, as upstream ignores it), and Sentinel's two extensions.
 */
const FIELDS = new Set([
  'domain',
  'key',
  'value',
  'descriptors',
  'rate_limit',
  'unit',
  'requests_per_unit',
  'unlimited',
  'shadow_mode',
  'quota_mode',
  'name',
  'replaces',
  'detailed_metric',
  'value_to_metric',
  'share_threshold',
  'metadata',
  'unit_multiplier',
  'algorithm',
]);

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const UINT32_MAX = 2n ** 32n - 1n;

/** Reads one file; throws a ConfigError naming the file and the field at fault. */
export function readConfigFile(path: string, text: string): FileSpec {
  return new FileReader(path).read(text);
}

class FileReader {
  constructor(private readonly path: string) {}

  read(text: string): FileSpec {
    const root = parseYaml(this.path, text);
    if (root === undefined || isNull(root)) return { path: this.path, domain: '', descriptors: [] };
    if (root.kind !== 'map') {
      this.fail(undefined, `expected a map of domain and descriptors, found ${describe(root)}`);
    }
    this.checkFields(root, '');
    const fields = byName(root);
    return {
      path: this.path,
      domain: this.text(fields.get('domain'), 'domain'),
      descriptors: this.list(fields.get('descriptors'), 'descriptors').map((item, i) =>
        this.descriptor(item as YamlMap, `descriptors[${i}]`),
      ),
    };
  }

  /**
   * Upstream's first pass, over the whole file before any field is read: every field name a
   * known one, every list a list of maps, and no number with a fraction, anywhere but under
   * `metadata`, whose content is free.
   */
  private checkFields(map: YamlMap, at: string): void {
    for (const [key, value] of map.entries) {
      if (key.kind !== 'scalar' || key.type !== 'string') {
        this.fail(at || undefined, `field name ${describe(key)} is not a string`);
      }
      const here = join(at, key.text);
      if (!FIELDS.has(key.text)) this.fail(here, `unknown field${suggestion(key.text)}`);
      if (key.text !== 'metadata') this.checkValue(value, here);
    }
  }

  private checkValue(value: YamlValue, at: string): void {
    if (value.kind === 'map') {
      this.checkFields(value, at);
    } else if (value.kind === 'list') {
      for (const [i, item] of value.items.entries()) {
        if (item.kind !== 'map') {
          this.fail(`${at}[${i}]`, `expected a map, found ${describe(item)}`);
        }
        this.checkFields(item, `${at}[${i}]`);
      }
    } else if (value.type === 'float') {
      this.fail(at, `${value.text} is not a whole number (quote it if it is a string)`);
    } else if (typeof value.value === 'bigint') {
      if (value.value < INT64_MIN || value.value > INT64_MAX)
        this.fail(at, `${value.text} is out of range`);
    }
  }

  private descriptor(map: YamlMap, at: string): DescriptorSpec {
    const fields = byName(map);
    const rateLimit = this.map(fields.get('rate_limit'), `${at}.rate_limit`);
    const metadata = this.map(fields.get('metadata'), `${at}.metadata`);
    return {
      at,
      key: this.text(fields.get('key'), `${at}.key`),
      value: this.text(fields.get('value'), `${at}.value`),
      rateLimit: rateLimit && this.rateLimit(rateLimit, `${at}.rate_limit`),
      descriptors: this.list(fields.get('descriptors'), `${at}.descriptors`).map((item, i) =>
        this.descriptor(item as YamlMap, `${at}.descriptors[${i}]`),
      ),
      shadowMode: this.flag(fields.get('shadow_mode'), `${at}.shadow_mode`),
      quotaMode: this.flag(fields.get('quota_mode'), `${at}.quota_mode`),
      detailedMetric: this.flag(fields.get('detailed_metric'), `${at}.detailed_metric`),
      valueToMetric: this.flag(fields.get('value_to_metric'), `${at}.value_to_metric`),
      shareThreshold: this.flag(fields.get('share_threshold'), `${at}.share_threshold`),
      metadata: metadata && (plain(metadata) as Record<string, unknown>),
    };
  }

  private rateLimit(map: YamlMap, at: string): RateLimitSpec {
    const fields = byName(map);
    return {
      at,
      unit: this.text(fields.get('unit'), `${at}.unit`),
      requestsPerUnit: this.count(fields.get('requests_per_unit'), `${at}.requests_per_unit`),
      unlimited: this.flag(fields.get('unlimited'), `${at}.unlimited`),
      name: this.text(fields.get('name'), `${at}.name`),
      replaces: this.list(fields.get('replaces'), `${at}.replaces`).map((item, i) =>
        this.text(byName(item as YamlMap).get('name'), `${at}.replaces[${i}].name`),
      ),
      unitMultiplier: this.multiplier(fields.get('unit_multiplier'), `${at}.unit_multiplier`),
      algorithm: this.algorithm(fields.get('algorithm'), `${at}.algorithm`),
    };
  }

  /** A string field takes any scalar as written, and a null as '', as yaml.v2 does. */
  private text(value: YamlValue | undefined, at: string): string {
    if (value === undefined) return '';
    if (value.kind !== 'scalar') this.fail(at, `expected a string, found ${describe(value)}`);
    return value.text;
  }

  private flag(value: YamlValue | undefined, at: string): boolean {
    if (value === undefined || isNull(value)) return false;
    if (value.kind === 'scalar' && typeof value.value === 'boolean') return value.value;
    return this.fail(at, `expected true or false, found ${describe(value)}`);
  }

  /** `requests_per_unit`: upstream's uint32. */
  private count(value: YamlValue | undefined, at: string): number {
    if (value === undefined || isNull(value)) return 0;
    if (value.kind === 'scalar' && typeof value.value === 'bigint') {
      if (value.value >= 0n && value.value <= UINT32_MAX) return Number(value.value);
    }
    return this.fail(
      at,
      `expected a whole number from 0 to ${UINT32_MAX}, found ${describe(value)}`,
    );
  }

  private list(value: YamlValue | undefined, at: string): readonly YamlValue[] {
    if (value === undefined || isNull(value)) return [];
    if (value.kind !== 'list') this.fail(at, `expected a list, found ${describe(value)}`);
    return value.items;
  }

  private map(value: YamlValue | undefined, at: string): YamlMap | undefined {
    if (value === undefined || isNull(value)) return undefined;
    if (value.kind !== 'map') this.fail(at, `expected a map, found ${describe(value)}`);
    return value;
  }

  /** Sentinel's `unit_multiplier`: a window of that many units. */
  private multiplier(value: YamlValue | undefined, at: string): number | undefined {
    if (value === undefined || isNull(value)) return undefined;
    if (value.kind === 'scalar' && typeof value.value === 'bigint' && value.value >= 1n) {
      if (value.value <= BigInt(Number.MAX_SAFE_INTEGER)) return Number(value.value);
    }
    return this.fail(at, `expected a whole number of at least 1, found ${describe(value)}`);
  }

  /** Sentinel's `algorithm`. */
  private algorithm(value: YamlValue | undefined, at: string): Algorithm | undefined {
    if (value === undefined || isNull(value)) return undefined;
    const name = value.kind === 'scalar' ? value.text : undefined;
    const known = ALGORITHMS.find((algorithm) => algorithm === name);
    if (known !== undefined) return known;
    return this.fail(
      at,
      `unknown algorithm ${describe(value)} (expected ${ALGORITHMS.join(', ')})`,
    );
  }

  private fail(at: string | undefined, problem: string): never {
    throw new ConfigError(this.path, at, problem);
  }
}

/** A map's fields by name; the first pass has made sure every name is a string. */
function byName(map: YamlMap): Map<string, YamlValue> {
  return new Map(map.entries.map(([key, value]) => [key.kind === 'scalar' ? key.text : '', value]));
}

function isNull(value: YamlValue): boolean {
  return value.kind === 'scalar' && value.type === 'null';
}

function join(at: string, name: string): string {
  return at === '' ? name : `${at}.${name}`;
}

/** How a value reads in an error. */
function describe(value: YamlValue): string {
  if (value.kind === 'list') return 'a list';
  if (value.kind === 'map') return 'a map';
  if (value.type === 'null') return 'nothing';
  if (value.type === 'string') return `'${value.text}'`;
  return value.text;
}

/** For a misspelt name, the field it most likely meant: the same letters, case and `_` aside. */
function suggestion(name: string): string {
  const squeeze = (text: string) => text.toLowerCase().replace(/[_\-\s]/g, '');
  const meant = [...FIELDS].find((field) => squeeze(field) === squeeze(name));
  return meant === undefined ? '' : ` (did you mean '${meant}'?)`;
}

/** `metadata` as plain data, numbers as numbers, for the service to hand back as it is. */
function plain(value: YamlValue): unknown {
  if (value.kind === 'list') return value.items.map(plain);
  if (value.kind === 'map') {
    return Object.fromEntries(
      value.entries.map(([key, item]) => [
        key.kind === 'scalar' ? key.text : JSON.stringify(plain(key)),
        plain(item),
      ]),
    );
  }
  return typeof value.value === 'bigint' ? Number(value.value) : value.value;
}
