// Who is this request? Ready-made identifiers over the request shape Express, Koa and Fastify share.
import { FingerprintCache } from '../fingerprint.ts';
import type { TierOptions } from '../types.ts';
import { checkFunction, checkOneOf, checkPositiveInteger, describe, fail } from '../validation.ts';
import { ipIdentity } from './client-ip.ts';
import { LookupCache } from './lookup-cache.ts';

/** What identifiers read: `req` in Express and Fastify, `ctx` in Koa. */
export interface RequestLike {
  headers: Record<string, string | string[] | undefined>;
  /** The client address, as the framework resolved it under its trust-proxy setting. */
  ip?: string;
}

export interface Identity {
  /** Whom the limits count for. Hashed before it reaches the store when it is long or odd. */
  key: string;
  /** Selects the policies; the limiter's anonymous tier when absent. */
  tier?: string;
  /**
   * This identity's own policies, in place of its tier's: a tenant's contract limits. Each
   * distinct set is compiled once and cached; see `ConsumeOptions.policies`.
   */
  policies?: TierOptions;
}

/**
 * An identifier's answer: an identity, nothing (let the next identifier try), or
 * `'unauthorized'` to answer 401, for an API key that the lookup does not know.
 */
export type IdentifyResult = Identity | 'unauthorized' | null | undefined;

export type Identifier<Req = RequestLike> = (req: Req) => IdentifyResult | Promise<IdentifyResult>;

/** Header values Sentinel reads at most; a longer one is not a credential anyone was issued. */
const MAX_HEADER_LENGTH = 4096;

/** A header's first value, trimmed; undefined when absent or empty. */
function firstValue(req: RequestLike, name: string): string | undefined {
  const raw = req.headers[name];
  return (Array.isArray(raw) ? raw[0] : raw)?.trim() || undefined;
}

function readHeader(req: RequestLike, name: string): string | undefined {
  const value = firstValue(req, name);
  return value !== undefined && value.length <= MAX_HEADER_LENGTH ? value : undefined;
}

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

export interface ApiKeyOptions {
  /** @default 'x-api-key' */
  header?: string;
  /** Also read `Authorization: Bearer <key>`. @default true */
  bearer?: boolean;
  /**
   * Finds the tenant and tier of a key; null for a key nobody was issued. Answers are cached.
   * @example (key) => db.apiKeys.find(key)
   */
  lookup?: (apiKey: string) => ApiKeyTenant | null | Promise<ApiKeyTenant | null>;
  /**
   * What a key the lookup does not know gets: the anonymous tier, or a 401. A key too long to
   * have been issued (over 4096 characters) is unknown too. `'reject'` needs a `lookup`.
   * @default 'anonymous'
   */
  unknownKey?: 'anonymous' | 'reject';
  /** Lookups cached at most, and key digests: a key is hashed once while it stays in use. @default 10_000 */
  cacheSize?: number;
  /** How long a lookup's answer is kept, in ms. @default 60_000 */
  cacheTtlMs?: number;
}

function headerName(value: unknown, option: string): string {
  if (typeof value !== 'string' || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(value)) {
    fail(option, `must be an HTTP header name, got ${describe(value)}`);
  }
  return value.toLowerCase();
}

const UNKNOWN_KEY = ['anonymous', 'reject'] as const;

/** The key a request carries, in the header or as a Bearer credential, however long. */
function readApiKey(req: RequestLike, header: string, bearer: boolean): string | undefined {
  const fromHeader = firstValue(req, header);
  if (fromHeader !== undefined || !bearer) return fromHeader;
  const authorization = firstValue(req, 'authorization');
  if (authorization === undefined || !/^bearer\s+/i.test(authorization)) return undefined;
  return authorization.replace(/^bearer\s+/i, '') || undefined;
}

/** Identifies a request by its API key, from a header or `Authorization: Bearer`. */
export function byApiKey({
  header = 'x-api-key',
  bearer = true,
  lookup,
  unknownKey = 'anonymous',
  cacheSize = 10_000,
  cacheTtlMs = 60_000,
}: ApiKeyOptions = {}): Identifier {
  const name = headerName(header, 'byApiKey.header');
  checkOneOf(unknownKey, UNKNOWN_KEY, 'byApiKey.unknownKey');
  if (lookup !== undefined) checkFunction(lookup, 'byApiKey.lookup');
  else if (unknownKey === 'reject') {
    fail('byApiKey.unknownKey', "'reject' needs a `lookup` to tell known keys from unknown ones");
  }
  checkPositiveInteger(cacheSize, 'byApiKey.cacheSize');
  checkPositiveInteger(cacheTtlMs, 'byApiKey.cacheTtlMs');
  const cache = new LookupCache<ApiKeyTenant | null>(cacheSize, cacheTtlMs);
  const hashes = new FingerprintCache(cacheSize, 'key:');
  const reject = unknownKey === 'reject';
  return function identifyByApiKey(req) {
    const apiKey = readApiKey(req, name, bearer);
    if (apiKey === undefined) return null;
    // Too long to be a key anyone was issued: an unknown key, which 'reject' refuses like any other.
    if (apiKey.length > MAX_HEADER_LENGTH) return reject ? 'unauthorized' : null;
    // 'key:' and the key's fingerprint: the identity, and the lookup cache's key.
    const fingerprinted = hashes.of(apiKey);
    if (lookup === undefined) return { key: fingerprinted };
    const key = apiKey;
    return cache
      .get(fingerprinted, async () => (await lookup(key)) ?? null)
      .then((found) => {
        if (found === null) return reject ? 'unauthorized' : null;
        const identity: Identity = { key: `tenant:${found.tenant}` };
        if (found.tier !== undefined) identity.tier = found.tier;
        if (found.policies !== undefined) identity.policies = found.policies;
        return identity;
      });
  };
}

/**
 * Identifies a request by a header naming its tenant, such as `x-tenant-id`. `tier` is the tier
 * of every request it identifies; without it they get the limiter's `defaultTier`.
 */
export function byHeader(header: string, { tier }: { tier?: string } = {}): Identifier {
  const name = headerName(header, 'byHeader');
  return function identifyByHeader(req) {
    const value = readHeader(req, name);
    if (value === undefined) return null;
    return tier === undefined ? { key: `${name}:${value}` } : { key: `${name}:${value}`, tier };
  };
}

export interface IpOptions {
  /** IPv6 clients are grouped by this prefix length. @default 56 */
  ipv6Subnet?: number;
}

/** Identifies a request by its client IP, as the framework resolved it under trust proxy. */
export function byIp({ ipv6Subnet = 56 }: IpOptions = {}): Identifier {
  checkPositiveInteger(ipv6Subnet, 'byIp.ipv6Subnet');
  if (ipv6Subnet > 128) fail('byIp.ipv6Subnet', `must be at most 128, got ${ipv6Subnet}`);
  return function identifyByIp(req) {
    const ip = ipIdentity(req.ip, ipv6Subnet);
    return ip === undefined ? null : { key: `ip:${ip}` };
  };
}

/** A promise, or any object with a `then` method, which `await` adopts as one. */
export function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

/**
 * Tries identifiers in turn; the first that yields an identity (or a 401) wins. It answers
 * synchronously while the identifiers do, as the built-in ones without a lookup do, and waits
 * only for one that returns a promise (or another thenable, as `await` would).
 */
export function chain<Req>(...identifiers: Identifier<Req>[]): Identifier<Req> {
  for (const identifier of identifiers) checkFunction(identifier, 'chain');
  const from = (req: Req, first: number): IdentifyResult | Promise<IdentifyResult> => {
    for (let i = first; i < identifiers.length; i++) {
      const found = (identifiers[i] as Identifier<Req>)(req);
      if (isThenable(found)) {
        return Promise.resolve(found).then((value) =>
          value !== null && value !== undefined ? value : from(req, i + 1),
        );
      }
      if (found !== null && found !== undefined) return found;
    }
    return null;
  };
  return function identifyByChain(req) {
    return from(req, 0);
  };
}
