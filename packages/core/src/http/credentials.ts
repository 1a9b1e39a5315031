// Identities from credentials a client presents, an API key or a tenant header: its own budget
// only once a lookup (or a proxy of the user's) confirms it, else within its client IP's.
import { FingerprintCache } from '../shared/fingerprint.ts';
import type { TierOptions } from '../shared/types.ts';
import {
  checkFunction,
  checkOneOf,
  checkPositiveInteger,
  describe,
  fail,
} from '../shared/validation.ts';
import { ipIdentity } from './client-ip.ts';
import {
  DEFAULT_IPV6_SUBNET,
  firstValue,
  type Identifier,
  type IdentifyResult,
  type Identity,
  MAX_HEADER_LENGTH,
  type RequestLike,
  readHeader,
} from './identity.ts';
import { LookupCache } from './lookup-cache.ts';

export interface ApiKeyTenant {
  /** Whom the key belongs to: keys of one tenant share its limits. */
  tenant: string;
  tier?: string;
  /**
   * The tenant's own policies, in place of its tier's; the tier still labels its decisions. A
   * change takes effect when the lookup's cached answer expires (`cacheTtlMs`).
   * @example { name: 'contract', limit: 5000, window: '1m' }
   */
  policies?: TierOptions;
}

/**
 * What a credential that no lookup confirmed gets:
 * - `'anonymous'`: nothing of its own. The next identifier in the chain decides, `byIp()` in the
 *   default identity, so the request counts by client IP whatever it carries.
 * - `'reject'`: a 401. Needs a `lookup`.
 * - `'count-unverified'`: a budget of its own, and the request also counts against its client
 *   IP's, in the default tier (see `Identity.within`). Two store calls per request, and a client
 *   that invents values still gets no more than its IP's budget in total.
 */
export type UnverifiedCredential = 'anonymous' | 'reject' | 'count-unverified';

const UNVERIFIED = ['anonymous', 'reject', 'count-unverified'] as const;

export interface ApiKeyOptions {
  /** @default 'x-api-key' */
  header?: string;
  /** Also read `Authorization: Bearer <key>`. @default true */
  bearer?: boolean;
  /**
   * Confirms a key: its tenant and tier, or null for a key nobody was issued. Answers are
   * cached. Without one no key is confirmed, so `unknownKey` must say what unverified keys get.
   * @example (key) => db.apiKeys.find(key)
   */
  lookup?: (apiKey: string) => ApiKeyTenant | null | Promise<ApiKeyTenant | null>;
  /**
   * What a key the lookup does not confirm gets; see `UnverifiedCredential`. A key too long to
   * have been issued (over 4096 characters) is never confirmed.
   * @default 'anonymous'
   */
  unknownKey?: UnverifiedCredential;
  /** Lookups cached at most, and key digests: a key is hashed once while it stays in use. @default 10_000 */
  cacheSize?: number;
  /** How long a lookup's answer is kept, in ms. @default 60_000 */
  cacheTtlMs?: number;
}

/** `byApiKey()`'s identifier, which also answers for a key outside any request. */
export interface ApiKeyIdentifier extends Identifier {
  /**
   * The identity a request bearing `apiKey` counts for: its tenant's, null for a key the lookup
   * does not confirm (whatever `unknownKey` would make of it: that depends on the client IP), or
   * `'unauthorized'` under `unknownKey: 'reject'`. For admin tools that look a key up.
   */
  identityOf(apiKey: string): IdentifyResult | Promise<IdentifyResult>;
}

function headerName(value: unknown, option: string): string {
  if (typeof value !== 'string' || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(value)) {
    fail(option, `must be an HTTP header name, got ${describe(value)}`);
  }
  return value.toLowerCase();
}

/** The key a request carries, in the header or as a Bearer credential, however long. */
function readApiKey(req: RequestLike, header: string, bearer: boolean): string | undefined {
  const fromHeader = firstValue(req, header);
  if (fromHeader !== undefined || !bearer) return fromHeader;
  const authorization = firstValue(req, 'authorization');
  if (authorization === undefined || !/^bearer\s+/i.test(authorization)) return undefined;
  return authorization.replace(/^bearer\s+/i, '') || undefined;
}

/**
 * The client IP's identity, which an unverified credential counts within: `byIp()`'s, or the
 * one `anonymous` budget of requests without an address.
 */
function ipWithin(req: RequestLike): string {
  const ip = ipIdentity(req.ip, DEFAULT_IPV6_SUBNET);
  return ip === undefined ? 'anonymous' : `ip:${ip}`;
}

/**
 * What `byApiKey` and `byHeader` share: checks a lookup and what unconfirmed values get.
 * `otherwise` names a further way out, for the error.
 */
function checkVerification(
  option: string,
  lookup: unknown,
  unknown: unknown,
  field: string,
  otherwise = '',
): void {
  checkOneOf(unknown, UNVERIFIED, `${option}.${field}`);
  if (lookup !== undefined) {
    checkFunction(lookup, `${option}.lookup`);
    return;
  }
  if (unknown === 'reject') {
    fail(`${option}.${field}`, "'reject' needs a `lookup` to tell known values from unknown ones");
  }
  if (unknown === 'anonymous') {
    fail(
      `${option}.lookup`,
      `is needed: without one nothing confirms a value, and a client could invent one per request; pass a \`lookup\`, or \`${field}: 'count-unverified'\` to count each value within its client IP's budget${otherwise}`,
    );
  }
}

/** The identity of a value nothing confirmed, as `unknown` says. */
function unconfirmed(
  req: RequestLike | undefined,
  unknown: UnverifiedCredential,
  key: string,
): IdentifyResult {
  if (unknown === 'reject') return 'unauthorized';
  if (unknown === 'anonymous' || req === undefined) return null;
  return { key, within: ipWithin(req) };
}

/** The identity of a tenant a lookup found. */
function tenantIdentity(found: ApiKeyTenant, tier?: string): Identity {
  const identity: Identity = { key: `tenant:${found.tenant}` };
  const foundTier = found.tier ?? tier;
  if (foundTier !== undefined) identity.tier = foundTier;
  if (found.policies !== undefined) identity.policies = found.policies;
  return identity;
}

/**
 * Identifies a request by its API key, from a header or `Authorization: Bearer`. A key counts as
 * its own only once `lookup` confirms it; see `unknownKey` for the rest.
 */
export function byApiKey({
  header = 'x-api-key',
  bearer = true,
  lookup,
  unknownKey = 'anonymous',
  cacheSize = 10_000,
  cacheTtlMs = 60_000,
}: ApiKeyOptions = {}): ApiKeyIdentifier {
  const name = headerName(header, 'byApiKey.header');
  checkVerification('byApiKey', lookup, unknownKey, 'unknownKey');
  checkPositiveInteger(cacheSize, 'byApiKey.cacheSize');
  checkPositiveInteger(cacheTtlMs, 'byApiKey.cacheTtlMs');
  const cache = new LookupCache<ApiKeyTenant | null>(cacheSize, cacheTtlMs);
  const hashes = new FingerprintCache(cacheSize, 'key:');
  const identityOf = (
    apiKey: string,
    req?: RequestLike,
  ): IdentifyResult | Promise<IdentifyResult> => {
    // Too long to be a key anyone was issued: unknown, and never looked up or hashed.
    if (apiKey.length > MAX_HEADER_LENGTH) return unconfirmed(req, unknownKey, 'key:too-long');
    // 'key:' and the key's fingerprint: the identity of an unverified key, and the cache's key.
    const fingerprinted = hashes.of(apiKey);
    if (lookup === undefined) return unconfirmed(req, unknownKey, fingerprinted);
    return cache
      .get(fingerprinted, async () => (await lookup(apiKey)) ?? null)
      .then((found) =>
        found === null ? unconfirmed(req, unknownKey, fingerprinted) : tenantIdentity(found),
      );
  };
  function identifyByApiKey(req: RequestLike): IdentifyResult | Promise<IdentifyResult> {
    const apiKey = readApiKey(req, name, bearer);
    return apiKey === undefined ? null : identityOf(apiKey, req);
  }
  identifyByApiKey.identityOf = (apiKey: string) => {
    if (typeof apiKey !== 'string') fail('apiKey', `must be a string, got ${describe(apiKey)}`);
    const trimmed = apiKey.trim();
    return trimmed === '' ? null : identityOf(trimmed);
  };
  return identifyByApiKey;
}

export interface HeaderOptions {
  /** The tier of every tenant it confirms, unless its lookup answers another. */
  tier?: string;
  /**
   * Confirms a tenant id: its tenant and tier, or null for an id that is not one. Answers are
   * cached.
   * @example (id) => db.tenants.find(id)
   */
  lookup?: (value: string) => ApiKeyTenant | null | Promise<ApiKeyTenant | null>;
  /**
   * The header is set by a proxy of yours after it authenticated the caller, and the proxy drops
   * any value a client sent: each value is then its own tenant, unchecked. Not with `lookup`.
   * @default false
   */
  trusted?: boolean;
  /** What a value the lookup does not confirm gets; see `UnverifiedCredential`. @default 'anonymous' */
  unknownValue?: UnverifiedCredential;
  /** Lookups cached at most. @default 10_000 */
  cacheSize?: number;
  /** How long a lookup's answer is kept, in ms. @default 60_000 */
  cacheTtlMs?: number;
}

/**
 * Identifies a request by a header naming its tenant, such as `x-tenant-id`, once `lookup`
 * confirms it: a client writes whatever headers it likes.
 */
export function byHeader(
  header: string,
  {
    tier,
    lookup,
    trusted = false,
    unknownValue = 'anonymous',
    cacheSize = 10_000,
    cacheTtlMs = 60_000,
  }: HeaderOptions = {},
): Identifier {
  const name = headerName(header, 'byHeader');
  if (tier !== undefined && typeof tier !== 'string') {
    fail('byHeader.tier', `must be a string, got ${describe(tier)}`);
  }
  if (typeof trusted !== 'boolean') {
    fail('byHeader.trusted', `must be true or false, got ${describe(trusted)}`);
  }
  if (trusted && lookup !== undefined) {
    fail('byHeader.trusted', 'says every value is a tenant, which a `lookup` would check again');
  }
  if (!trusted) {
    const proxy = ', or `trusted: true` when a proxy of yours sets the header';
    checkVerification('byHeader', lookup, unknownValue, 'unknownValue', proxy);
  }
  checkPositiveInteger(cacheSize, 'byHeader.cacheSize');
  checkPositiveInteger(cacheTtlMs, 'byHeader.cacheTtlMs');
  const cache = new LookupCache<ApiKeyTenant | null>(cacheSize, cacheTtlMs);
  return function identifyByHeader(req) {
    const value = readHeader(req, name);
    if (value === undefined) return null;
    const key = `${name}:${value}`;
    if (trusted) return tier === undefined ? { key } : { key, tier };
    if (lookup === undefined) return unconfirmed(req, unknownValue, key);
    return cache
      .get(value, async () => (await lookup(value)) ?? null)
      .then((found) =>
        found === null ? unconfirmed(req, unknownValue, key) : tenantIdentity(found, tier),
      );
  };
}
