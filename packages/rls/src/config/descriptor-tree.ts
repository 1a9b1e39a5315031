// Every domain's descriptors as one tree, keyed as upstream keys them, with each rule checked.
import { type RateLimitRule, UNIT_SECONDS, type Unit } from '../types.ts';
import { ConfigError } from './config-error.ts';
import type { DescriptorSpec, FileSpec, RateLimitSpec } from './config-file.ts';
import { type Wildcard, wildcard } from './wildcard.ts';

/**
 * One level of a domain's descriptors. Children are keyed `key_value`, or `key` where no value
 * is configured; upstream keys them so, and so two spellings that join alike (`a_b` with no
 * value, `a` with value `b`) are one descriptor here too.
 */
export interface DescriptorNode {
  readonly children: Map<string, DescriptorNode>;
  /** The children whose key contains `*`, in the order configured: the first to match wins. */
  readonly wildcards: Wildcard[];
  readonly limit: ConfiguredLimit | undefined;
  readonly valueToMetric: boolean;
  /** With `share_threshold`: the node's own wildcard key, which its matches share a bucket by. */
  readonly sharedPattern: string | undefined;
}

/** A `rate_limit` and the flags of the descriptor that holds it. */
export interface ConfiguredLimit {
  readonly rule: RateLimitRule;
  readonly replaces: readonly string[];
  readonly shadowMode: boolean;
  readonly quotaMode: boolean;
  readonly detailedMetric: boolean;
  readonly metadata: Readonly<Record<string, unknown>> | undefined;
}

const UNIT_NAMES = Object.keys(UNIT_SECONDS).join(', ');

/**
 * Builds each domain's tree from its files, in order. A domain in two files is an error unless
 * `mergeDomains` (upstream's MERGE_DOMAIN_CONFIG), which adds the later file's descriptors to
 * the earlier's top level: a descriptor both define is still an error.
 */
export function buildDomains(
  files: readonly FileSpec[],
  mergeDomains: boolean,
): Map<string, DescriptorNode> {
  const domains = new Map<string, { root: DescriptorNode; path: string }>();
  for (const file of files) {
    if (file.domain === '') throw new ConfigError(file.path, 'domain', 'missing or empty');
    const known = domains.get(file.domain);
    if (known !== undefined && !mergeDomains) {
      throw new ConfigError(
        file.path,
        'domain',
        `'${file.domain}' is already defined in ${known.path} (MERGE_DOMAIN_CONFIG=true merges them)`,
      );
    }
    const root = known?.root ?? node(undefined, false, undefined);
    addDescriptors(root, file.descriptors, `${file.domain}.`, file.path);
    if (known === undefined) domains.set(file.domain, { root, path: file.path });
  }
  return new Map([...domains].map(([domain, { root }]) => [domain, root]));
}

function addDescriptors(
  parent: DescriptorNode,
  specs: readonly DescriptorSpec[],
  parentKey: string,
  path: string,
): void {
  for (const spec of specs) {
    if (spec.key === '') throw new ConfigError(path, `${spec.at}.key`, 'missing or empty');
    const key = spec.value === '' ? spec.key : `${spec.key}_${spec.value}`;
    if (parent.children.has(key)) {
      throw new ConfigError(path, spec.at, `descriptor '${parentKey}${key}' is already defined`);
    }
    const limit = spec.rateLimit && configuredLimit(spec, spec.rateLimit, path);
    if (spec.shareThreshold && !key.includes('*')) {
      throw new ConfigError(
        path,
        `${spec.at}.share_threshold`,
        `needs a wildcard value (one containing '*'), found '${key}'`,
      );
    }
    if (key.includes('*')) parent.wildcards.push(wildcard(key));
    const child = node(limit, spec.valueToMetric, spec.shareThreshold ? key : undefined);
    addDescriptors(child, spec.descriptors, `${parentKey}${key}.`, path);
    parent.children.set(key, child);
  }
}

function node(
  limit: ConfiguredLimit | undefined,
  valueToMetric: boolean,
  sharedPattern: string | undefined,
): DescriptorNode {
  return { children: new Map(), wildcards: [], limit, valueToMetric, sharedPattern };
}

function configuredLimit(
  spec: DescriptorSpec,
  rateLimit: RateLimitSpec,
  path: string,
): ConfiguredLimit {
  const fail = (field: string, problem: string): never => {
    throw new ConfigError(path, `${rateLimit.at}.${field}`, problem);
  };
  // Upstream matches the unit's upper case against its enum names, so `Minute` is a minute.
  const unit = rateLimit.unit.toUpperCase().toLowerCase();
  const known = Object.hasOwn(UNIT_SECONDS, unit) ? (unit as Unit) : undefined;
  if (rateLimit.unlimited) {
    // Upstream refuses a valid unit beside `unlimited` and lets a meaningless one pass.
    if (known !== undefined) fail('unit', 'not allowed with unlimited: true');
    if (rateLimit.unitMultiplier !== undefined)
      fail('unit_multiplier', 'not allowed with unlimited: true');
    if (rateLimit.algorithm !== undefined) fail('algorithm', 'not allowed with unlimited: true');
  } else if (known === undefined) {
    fail(
      'unit',
      rateLimit.unit === ''
        ? `missing (expected ${UNIT_NAMES})`
        : `unknown unit '${rateLimit.unit}' (expected ${UNIT_NAMES})`,
    );
  }
  const unitMultiplier = rateLimit.unitMultiplier ?? 1;
  if (!Number.isSafeInteger(UNIT_SECONDS[known ?? 'second'] * unitMultiplier * 1000)) {
    fail('unit_multiplier', `${unitMultiplier} ${unit}s is too long a window`);
  }
  rateLimit.replaces.forEach((name, i) => {
    if (name === '') fail(`replaces[${i}].name`, 'missing or empty');
    if (name === rateLimit.name) fail(`replaces[${i}].name`, `'${name}' is this limit's own name`);
  });
  return {
    // An unlimited rule counts nothing: its unit is never read, and says second.
    rule: rule(rateLimit, known ?? 'second', unitMultiplier),
    replaces: rateLimit.replaces,
    shadowMode: spec.shadowMode,
    quotaMode: spec.quotaMode,
    detailedMetric: spec.detailedMetric,
    metadata:
      spec.metadata !== undefined && Object.keys(spec.metadata).length > 0
        ? spec.metadata
        : undefined,
  };
}

function rule(rateLimit: RateLimitSpec, unit: Unit, unitMultiplier: number): RateLimitRule {
  return {
    name: rateLimit.name === '' ? undefined : rateLimit.name,
    unit,
    unitMultiplier,
    requestsPerUnit: rateLimit.requestsPerUnit,
    unlimited: rateLimit.unlimited,
    algorithm: rateLimit.algorithm ?? 'fixed-window',
    windowMs: UNIT_SECONDS[unit] * unitMultiplier * 1000,
  };
}
