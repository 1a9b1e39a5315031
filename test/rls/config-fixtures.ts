// The configuration suites' fixtures: YAML files under fixtures/config, and a short way to ask
// which limit a descriptor gets.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  type LoadOptions,
  loadConfig,
  type MatchedLimit,
  type RateLimitConfig,
  type Unit,
} from '@sentinel/rls';

const FIXTURES = fileURLToPath(new URL('./fixtures/config/', import.meta.url));

/** A fixture as loadConfig takes it, named `fixtures/config/<name>` in errors. */
export function fixture(name: string): { path: string; text: string } {
  return { path: `fixtures/config/${name}`, text: readFileSync(FIXTURES + name, 'utf8') };
}

export function load(names: readonly string[], options?: LoadOptions): RateLimitConfig {
  return loadConfig(names.map(fixture), options);
}

/** One inline file, named `inline.yaml` in errors. */
export function loadText(text: string, options?: LoadOptions): RateLimitConfig {
  return loadConfig([{ path: 'inline.yaml', text }], options);
}

/** The limit of one descriptor, written as `[key, value]` pairs. */
export function limitOf(
  config: RateLimitConfig,
  domain: string,
  pairs: ReadonlyArray<readonly [string, string]>,
  limit?: { requestsPerUnit: number; unit: Unit },
): MatchedLimit | undefined {
  return config.matchAll(domain, [{ entries: entries(pairs), limit }])[0];
}

export function entries(pairs: ReadonlyArray<readonly [string, string]>) {
  return pairs.map(([key, value]) => ({ key, value }));
}

/** What a test usually asserts of a limit: its count, unit and statistics name. */
export function summary(limit: MatchedLimit | undefined) {
  return (
    limit && {
      requestsPerUnit: limit.rule.requestsPerUnit,
      unit: limit.rule.unit,
      statKey: limit.statKey,
    }
  );
}
