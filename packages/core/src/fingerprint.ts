// Truncated SHA-256 digests: raw credentials and odd identities never reach the store or logs.
import { createHash } from 'node:crypto';

/** 132 bits of SHA-256 in base64url: 22 characters, collision-free at any realistic scale. */
export function fingerprint(value: string): string {
  return createHash('sha256').update(value).digest('base64url').slice(0, 22);
}

/**
 * 1 to 200 characters of printable ASCII other than space and the braces `{` `}` (0x7b, 0x7d),
 * not starting with `~`, which marks fingerprints.
 */
const PLAIN_KEY = /^(?!~)[\x21-\x7a\x7c\x7e]{1,200}$/;

/**
 * The identity as it appears in store keys. Printable ASCII up to 200 characters, without the
 * braces of Redis hash tags, stays readable; anything else (long values, spaces, CR/LF,
 * unicode, braces, a leading `~`) becomes `~` and its fingerprint.
 */
export function storageIdentity(key: string): string {
  return PLAIN_KEY.test(key) ? key : `~${fingerprint(key)}`;
}
