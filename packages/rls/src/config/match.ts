// The limit each descriptor of a request gets, found as envoyproxy/ratelimit finds it.
import {
  type DescriptorEntry,
  type MatchedLimit,
  type RequestDescriptor,
  UNIT_SECONDS,
} from '../types.ts';
import type { ConfiguredLimit, DescriptorNode } from './descriptor-tree.ts';
import { matchesWildcard } from './wildcard.ts';

/** A match, with what `replaces` needs to know of it. */
interface Found {
  readonly limit: MatchedLimit;
  readonly replaces: readonly string[];
}

/**
 * The limit of each descriptor, in order. Of the limits found, one whose `name` another found
 * limit `replaces` (in any descriptor of the request, itself replaced or not) is dropped. An
 * unlimited one stays: upstream answers it as unlimited whatever replaces it, and what it
 * replaces is dropped all the same.
 */
export function matchAll(
  domain: string,
  root: DescriptorNode | undefined,
  descriptors: readonly RequestDescriptor[],
): Array<MatchedLimit | undefined> {
  if (root === undefined) return descriptors.map(() => undefined);
  const found = descriptors.map((descriptor) => matchOne(domain, root, descriptor));
  const replaced = new Set(found.flatMap((match) => match?.replaces ?? []));
  return found.map((match) => {
    if (match === undefined) return undefined;
    const { name, unlimited } = match.limit.rule;
    return name !== undefined && !unlimited && replaced.has(name) ? undefined : match.limit;
  });
}

function matchOne(
  domain: string,
  root: DescriptorNode,
  descriptor: RequestDescriptor,
): Found | undefined {
  const { entries, limit } = descriptor;
  if (limit !== undefined) return { limit: requestedLimit(domain, entries, limit), replaces: [] };
  return configuredMatch(domain, root, entries);
}

/**
 * The limit a request names for its descriptor (Envoy's `limit` override). It applies whatever
 * the configuration says, even where nothing is configured, and carries no name, no replaces
 * and no shadow mode. It counts in the bucket of the request's own entries, and its statistics
 * take every value the request sent.
 */
function requestedLimit(
  domain: string,
  entries: readonly DescriptorEntry[],
  { requestsPerUnit, unit }: NonNullable<RequestDescriptor['limit']>,
): MatchedLimit {
  return {
    statKey: `${domain}.${entries.map(({ key, value }) => (value === '' ? key : `${key}_${value}`)).join('.')}`,
    bucket: entries,
    rule: {
      name: undefined,
      unit,
      unitMultiplier: 1,
      requestsPerUnit,
      unlimited: false,
      algorithm: 'fixed-window',
      windowMs: UNIT_SECONDS[unit] * 1000,
    },
    shadowMode: false,
    detailedMetric: false,
    quotaMode: false,
    metadata: undefined,
  };
}

/**
 * Walks the tree one entry a level. At each, the most specific child matches: `key_value`
 * exactly, else the first wildcard (in the order configured) that matches `key_value`, else
 * `key` alone. Only a limit at the level of the request's last entry applies: a request with
 * more entries than the tree is deep, or one that stops above the limit, gets none.
 */
function configuredMatch(
  domain: string,
  root: DescriptorNode,
  entries: readonly DescriptorEntry[],
): Found | undefined {
  let level = root;
  let found: ConfiguredLimit | undefined;
  // Per entry: the configured pattern its value shares a bucket under (share_threshold).
  const shared: Array<string | undefined> = [];
  // Upstream's two stat names, built as it walks: every value (detailed_metric), or the values
  // the configuration shows (value_to_metric, or a value configured or matched by a wildcard).
  let detailedKey = domain;
  let statKey = domain;
  for (const [i, { key, value }] of entries.entries()) {
    const joined = `${key}_${value}`;
    detailedKey += `.${joined}`;
    let node = level.children.get(joined);
    const matched =
      node === undefined ? level.wildcards.find((w) => matchesWildcard(w, joined)) : undefined;
    if (matched !== undefined) node = level.children.get(matched.key);
    const byValue = node !== undefined;
    node ??= level.children.get(key);
    statKey += `.${key}`;
    if (node === undefined) break;
    if (matched !== undefined && node.sharedPattern !== undefined) {
      shared[i] = withoutKey(node.sharedPattern, key);
    }
    const shown =
      matched !== undefined
        ? (shared[i] ?? (node.valueToMetric ? value : withoutKey(matched.key, key)))
        : byValue || node.valueToMetric
          ? value
          : '';
    if (shown !== '') statKey += `_${shown}`;
    if (i === entries.length - 1) found = node.limit;
    if (node.children.size === 0) break;
    level = node;
  }
  if (found === undefined) return undefined;
  const sharing = shared.some((pattern) => pattern !== undefined);
  return {
    limit: {
      statKey: found.detailedMetric
        ? sharing
          ? sharedDetailedKey(domain, entries, shared)
          : detailedKey
        : statKey,
      bucket: sharing
        ? entries.map((entry, i) => ({ key: entry.key, value: shared[i] ?? entry.value }))
        : entries,
      rule: found.rule,
      shadowMode: found.shadowMode,
      detailedMetric: found.detailedMetric,
      quotaMode: found.quotaMode,
      metadata: found.metadata,
    },
    replaces: found.replaces,
  };
}

/**
 * detailed_metric's name where values share a bucket: each shared value as its pattern, the
 * others as sent (an empty one without its `_`, unlike the plain detailed name, as upstream).
 */
function sharedDetailedKey(
  domain: string,
  entries: readonly DescriptorEntry[],
  shared: ReadonlyArray<string | undefined>,
): string {
  const parts = entries.map(({ key, value }, i) => {
    const shown = shared[i] ?? value;
    return shown === '' ? key : `${key}_${shown}`;
  });
  return [domain, ...parts].join('.');
}

/** A configured `key_value*` less the request's `key_`: the value's pattern. */
function withoutKey(configured: string, key: string): string {
  return configured.startsWith(`${key}_`) ? configured.slice(key.length + 1) : configured;
}
