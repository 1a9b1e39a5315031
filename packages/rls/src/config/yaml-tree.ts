// A configuration file's YAML as envoyproxy/ratelimit's parser (Go's yaml.v2) reads it: YAML 1.1
// scalars, the first document only, anchors and `<<` merges resolved, a repeated key's last value.
import { type Document, isAlias, isMap, isScalar, isSeq, type Node, parseAllDocuments } from 'yaml';
import { ConfigError } from './config-error.ts';

export type YamlValue = YamlScalar | YamlList | YamlMap;

/**
 * A scalar and the type YAML 1.1 resolves it to. `text` is what a string field receives: the
 * string itself, or a plain scalar as written, so `value: 0123` matches "0123", not "83".
 */
export interface YamlScalar {
  readonly kind: 'scalar';
  readonly type: 'string' | 'int' | 'float' | 'bool' | 'null';
  readonly text: string;
  /** The resolved value: an int as a bigint, so that its range is checked exactly. */
  readonly value: string | bigint | number | boolean | null;
}

export interface YamlList {
  readonly kind: 'list';
  readonly items: readonly YamlValue[];
}

export interface YamlMap {
  readonly kind: 'map';
  /** In the order written; a key written twice keeps its first place and its last value. */
  readonly entries: ReadonlyArray<readonly [key: YamlValue, value: YamlValue]>;
}

/** A null, or a key with no value: a string field reads it as '', as yaml.v2 does. */
const NULL: YamlScalar = { kind: 'scalar', type: 'null', text: '', value: null };

/** Parses `text`; undefined for a file with no document (empty, or only comments). */
export function parseYaml(path: string, text: string): YamlValue | undefined {
  const documents = parseAllDocuments(text, {
    version: '1.1',
    uniqueKeys: false,
    intAsBigInt: true,
    // yaml.v2 reads 12:30 and 2001-12-14 as strings, where YAML 1.1 has sexagesimals and dates.
    customTags: (tags) =>
      tags.filter((tag) =>
        typeof tag === 'string'
          ? !['intTime', 'floatTime', 'timestamp'].includes(tag)
          : tag.format !== 'TIME' && tag.tag !== 'tag:yaml.org,2002:timestamp',
      ),
  });
  // yaml.v2 decodes the first document of a stream and never looks at the rest.
  const document = Array.isArray(documents) ? documents[0] : undefined;
  if (document === undefined) return undefined;
  const error = document.errors[0];
  if (error !== undefined) {
    const at = error.linePos?.[0];
    const where = at === undefined ? undefined : `line ${at.line}, column ${at.col}`;
    // Its message repeats the place, before a code frame: the place is in `where` already.
    const message = error.message.replace(/ at line \d+, column \d+:[\s\S]*$/, '');
    throw new ConfigError(path, where, `invalid YAML: ${message}`);
  }
  if (document.contents === null) return undefined;
  return new TreeReader(path, document).read(document.contents, []);
}

/**
 * Aliases one file may expand: a few nested aliases can otherwise stand for billions of nodes.
 * yaml.v2 refuses such a file too ("excessive aliasing").
 */
const MAX_ALIASES = 10_000;

class TreeReader {
  #aliases = 0;

  constructor(
    private readonly path: string,
    private readonly document: Document,
  ) {}

  /** `open`: the aliased nodes being read, so that one that contains itself ends in an error. */
  read(node: Node | null, open: readonly Node[]): YamlValue {
    if (node === null) return NULL;
    if (isAlias(node)) {
      if (++this.#aliases > MAX_ALIASES) {
        throw new ConfigError(
          this.path,
          undefined,
          `invalid YAML: more than ${MAX_ALIASES} aliases`,
        );
      }
      const target = node.resolve(this.document);
      if (target === undefined || open.includes(target)) {
        throw new ConfigError(this.path, undefined, `invalid YAML: alias *${node.source} loops`);
      }
      return this.read(target, [...open, target]);
    }
    if (isScalar(node)) return scalar(node.value, node.source);
    if (isSeq(node)) {
      return { kind: 'list', items: node.items.map((item) => this.read(item as Node, open)) };
    }
    if (isMap(node)) {
      const entries = new Map<string, [YamlValue, YamlValue]>();
      this.addEntries(node, entries, open);
      return { kind: 'map', entries: [...entries.values()] };
    }
    throw new ConfigError(this.path, undefined, 'invalid YAML: a node of an unknown kind');
  }

  /**
   * Adds `node`'s pairs to `entries`, in order, each overwriting an equal key before it. A `<<`
   * merge is applied where it stands, as yaml.v2 does: a key after it overrides what it merged,
   * and one before it is overridden. Of a list of merged maps, the first wins.
   */
  private addEntries(
    node: Node,
    entries: Map<string, [YamlValue, YamlValue]>,
    open: readonly Node[],
  ): void {
    if (!isMap(node)) return;
    for (const pair of node.items) {
      const key = pair.key as Node | null;
      const value = pair.value as Node | null;
      if (isScalar(key) && typeof key.value === 'symbol') {
        const sources = isSeq(value) ? [...value.items].reverse() : [value];
        for (const source of sources) {
          const target = isAlias(source) ? source.resolve(this.document) : (source as Node | null);
          if (target === undefined || target === null || !isMap(target)) {
            throw new ConfigError(this.path, undefined, 'invalid YAML: << merges only maps');
          }
          this.addEntries(target, entries, [...open, target]);
        }
        continue;
      }
      const readKey = this.read(key, open);
      // A key that is a list or a map equals no other: it is refused anyway.
      const slot =
        readKey.kind === 'scalar' ? `${readKey.type}:${readKey.text}` : `#${entries.size}`;
      entries.set(slot, [readKey, this.read(value, open)]);
    }
  }
}

function scalar(value: unknown, source: string | undefined): YamlScalar {
  if (value === null) return NULL;
  const written = source ?? String(value);
  switch (typeof value) {
    case 'string':
      return { kind: 'scalar', type: 'string', text: value, value };
    case 'bigint':
      return { kind: 'scalar', type: 'int', text: written, value };
    case 'number':
      return { kind: 'scalar', type: 'float', text: written, value };
    case 'boolean':
      return { kind: 'scalar', type: 'bool', text: written, value };
    default:
      // An explicit tag this configuration has no use for (!!binary): its text, as yaml.v2 reads it.
      return { kind: 'scalar', type: 'string', text: written, value: written };
  }
}
