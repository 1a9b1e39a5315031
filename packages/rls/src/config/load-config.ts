// A configuration in envoyproxy/ratelimit's YAML format, loaded from the text of its files.
import type { MatchedLimit, RateLimitConfig, RequestDescriptor } from '../types.ts';
import { readConfigFile } from './config-file.ts';
import { buildDomains, type DescriptorNode } from './descriptor-tree.ts';
import { matchAll } from './match.ts';

export interface LoadOptions {
  /**
   * Upstream's MERGE_DOMAIN_CONFIG: files may share a domain, each adding its descriptors to
   * it. Without it, a domain in two files is an error.
   * @default false
   */
  readonly mergeDomains?: boolean;
}

/**
 * Loads every file as one configuration. Each file is read and its fields checked before any
 * file's descriptors are, as upstream does; the first problem throws a ConfigError
 * naming the file and the field.
 * @example loadConfig([{ path: 'config/app.yaml', text }], { mergeDomains: false })
 */
export function loadConfig(
  files: ReadonlyArray<{ readonly path: string; readonly text: string }>,
  options: LoadOptions = {},
): RateLimitConfig {
  const { mergeDomains = false } = options;
  const specs = files.map(({ path, text }) => readConfigFile(path, text));
  return new LoadedConfig(buildDomains(specs, mergeDomains));
}

class LoadedConfig implements RateLimitConfig {
  readonly domains: readonly string[];

  constructor(private readonly roots: ReadonlyMap<string, DescriptorNode>) {
    this.domains = [...roots.keys()];
  }

  matchAll(
    domain: string,
    descriptors: readonly RequestDescriptor[],
  ): Array<MatchedLimit | undefined> {
    return matchAll(domain, this.roots.get(domain), descriptors);
  }
}
