// Store keys: the identity as they carry it (readable, or a truncated SHA-256 digest), and the
// keys of one identity under a plan.
import { createHash } from 'node:crypto';
import type { Plan } from './policy.ts';
import type { StoreRequest } from './types.ts';

/** 132 bits of SHA-256 in base64url: 22 characters, collision-free at any realistic scale. */
export function fingerprint(value: string): string {
  return createHash('sha256').update(value).digest('base64url').slice(0, 22);
}

/**
 * Whether a key is stored as written: 1 to 200 characters of printable ASCII (0x21 to 0x7e)
 * other than the braces `{` `}` (0x7b, 0x7d), not starting with `~`, which marks fingerprints.
 * A loop over char codes rather than a regular expression: it runs on every decision.
 */
function isPlain(key: string): boolean {
  const length = key.length;
  if (length === 0 || length > 200 || key.charCodeAt(0) === 0x7e) return false;
  for (let i = 0; i < length; i++) {
    const code = key.charCodeAt(i);
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
  return isPlain(key) ? key : `~${fingerprint(key)}`;
}

/**
 * The store keys of a plan under a prefix: `<prefix>:{<identity>}<suffix>`, one per policy, all
 * under the identity's hash tag. A key's namespace is the key with its identity cut out,
 * `<prefix>:{}<suffix>`, which the memory store files state under.
 */
export class KeyLayout {
  readonly namespaces: readonly string[];

  constructor(
    readonly prefix: string,
    readonly plan: Plan,
  ) {
    this.namespaces = plan.keySuffixes.map((suffix) => `${prefix}:{}${suffix}`);
  }

  keysOf(identity: string): string[] {
    const base = `${this.prefix}:{${identity}}`;
    return this.plan.keySuffixes.map((suffix) => base + suffix);
  }
}

/**
 * A request for the keys of one identity, which spells them out only when a store reads `keys`:
 * the memory store finds state by identity and namespace, without building and hashing the
 * long key strings, which cost more than the rest of a decision in memory.
 */
export class IdentityRequest implements StoreRequest {
  readonly policies: StoreRequest['policies'];
  readonly script: StoreRequest['script'];
  readonly args: StoreRequest['args'];
  /**
   * Unix ms when the limiter handed it to a store, read once for the breaker and the memory
   * store alike: Date.now() costs about 50 ns, a tenth of a decision in memory. NaN until sent.
   */
  sentAt = Number.NaN;
  #keys: readonly string[] | undefined;

  constructor(
    /** As storageIdentity gives it. */
    readonly identity: string,
    readonly layout: KeyLayout,
    readonly cost: number,
    readonly apply: boolean,
    readonly now: number | undefined,
  ) {
    const { plan } = layout;
    this.policies = plan.policies;
    this.script = plan.script;
    this.args = plan.args;
  }

  get keys(): readonly string[] {
    this.#keys ??= this.layout.keysOf(this.identity);
    return this.#keys;
  }
}
