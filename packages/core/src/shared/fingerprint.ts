// The identity as store keys carry it: readable, or a truncated SHA-256 digest.
import { createHash } from 'node:crypto';
import { charCodeAt } from './char-code.ts';

/** 132 bits of SHA-256 in base64url: 22 characters, collision-free at any realistic scale. */
export function fingerprint(value: string): string {
  return createHash('sha256').update(value).digest('base64url').slice(0, 22);
}

/**
 * Fingerprints of the values seen lately, at most `size` of them, the oldest forgotten first: a
 * client sends the same API key with every request, and SHA-256 is the largest cost of
 * identifying it. The raw values stay in this process's memory only. Each fingerprint is held
 * after `prefix`: one string per value, whose characters are read on every decision, rather than
 * a new one built per request.
 */
export class FingerprintCache {
  readonly #digests = new Map<string, string>();
  readonly #size: number;
  readonly #prefix: string;

  constructor(size = 10_000, prefix = '') {
    this.#size = size;
    this.#prefix = prefix;
  }

  /** Values held now. */
  get size(): number {
    return this.#digests.size;
  }

  of(value: string): string {
    let digest = this.#digests.get(value);
    if (digest === undefined) {
      digest = this.#prefix + fingerprint(value);
      if (this.#digests.size >= this.#size) {
        this.#digests.delete(this.#digests.keys().next().value as string);
      }
      this.#digests.set(value, digest);
    }
    return digest;
  }
}

/**
 * Whether a key is stored as written: 1 to 200 characters of printable ASCII (0x21 to 0x7e)
 * other than the braces `{` `}` (0x7b, 0x7d), not starting with `~`, which marks fingerprints.
 * A loop over char codes rather than a regular expression: it runs on every decision.
 */
function isPlain(key: string): boolean {
  const length = key.length;
  if (length === 0 || length > 200 || charCodeAt.call(key, 0) === 0x7e) return false;
  for (let i = 0; i < length; i++) {
    const code = charCodeAt.call(key, i);
    if (code < 0x21 || code > 0x7e || code === 0x7b || code === 0x7d) return false;
  }
  return true;
}

/**
 * The identity as it appears in store keys. Printable ASCII up to 200 characters, without the
 * braces of Redis hash tags, stays readable; anything else (long values, spaces, CR/LF,
 * unicode, braces, a leading `~`) becomes `~` and its fingerprint.
 */
export function storageIdentity(key: string): string {
  if (isPlain(key)) return key;
  return key.length <= MAX_KEPT ? digests.of(key) : `~${fingerprint(key)}`;
}

/**
 * The fingerprints storageIdentity made lately: a caller keyed by a credential, or by an Envoy
 * descriptor (see descriptorKey), sends the same long key again and again, and SHA-256 costs more
 * than the rest of a decision in memory.
 */
const digests = new FingerprintCache(10_000, '~');
/** Keys kept at most this long, so that the cache holds 10,000 of them in a few megabytes. */
const MAX_KEPT = 512;
