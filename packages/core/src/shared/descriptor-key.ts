// The identity of an Envoy rate limit descriptor: what sentinel-rls counts a descriptor's
// requests under, and what an app passes as its key to count against the same budget.

/** One entry of a descriptor: Envoy's `{ key, value }`. */
export interface DescriptorEntryLike {
  readonly key: string;
  readonly value: string;
}

// A control character no entry is expected to hold, and which keeps the key from being stored as
// written: descriptor values are often credentials (an API key header), so the store only ever
// sees the key's fingerprint (see storageIdentity).
const SEPARATOR = '\u001f';

/**
 * The limiter key of a descriptor of `domain`: the entries in order, each key with its value.
 * A limiter's consume with it, and a policy of the same name, window and algorithm, counts in
 * the bucket sentinel-rls counts that descriptor in, under the same prefix and Redis.
 * @example descriptorKey('api', [{ key: 'tenant', value: 'acme' }])
 */
export function descriptorKey(domain: string, entries: readonly DescriptorEntryLike[]): string {
  let key = `rls${SEPARATOR}${escaped(domain)}`;
  for (const { key: name, value } of entries) {
    key += `${SEPARATOR}${escaped(name)}=${escaped(value)}`;
  }
  return key;
}

/** Escapes what would make two descriptors spell one key: the separator, `=` and `\`. */
function escaped(part: string): string {
  if (!part.includes('\\') && !part.includes('=') && !part.includes(SEPARATOR)) return part;
  return part
    .replaceAll('\\', '\\\\')
    .replaceAll('=', '\\=')
    .replaceAll(SEPARATOR, `\\${SEPARATOR}`);
}
