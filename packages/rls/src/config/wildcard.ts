// The `*` of a descriptor's value: each one matches any run of characters, the empty one too.

/**
 * A wildcard as upstream matches it: against the whole `key_value` string, the configured one
 * cut at each `*` once, at load.
 */
export interface Wildcard {
  /** The configured `key_value` (or `key`), as the descriptor tree is keyed. */
  readonly key: string;
  readonly parts: readonly string[];
}

export function wildcard(key: string): Wildcard {
  return { key, parts: key.split('*') };
}

/** Whether `text` is the wildcard's literal parts in order, with anything between them. */
export function matchesWildcard({ parts }: Wildcard, text: string): boolean {
  const first = parts[0] ?? '';
  const last = parts[parts.length - 1] ?? '';
  if (parts.length === 1) return text === first;
  const fixed = parts.reduce((sum, part) => sum + part.length, 0);
  if (text.length < fixed || !text.startsWith(first) || !text.endsWith(last)) return false;
  // The middle parts, each at its first place after the one before, between the two ends.
  const end = text.length - last.length;
  let from = first.length;
  for (const part of parts.slice(1, -1)) {
    const found = text.indexOf(part, from);
    if (found < 0 || found + part.length > end) return false;
    from = found + part.length;
  }
  return true;
}
