// Who is this request? The shape identifiers read, byIp, chain, and the helpers credentials share.
import type { TierOptions } from '../shared/types.ts';
import { checkFunction, checkPositiveInteger, fail } from '../shared/validation.ts';
import { ipIdentity } from './client-ip.ts';

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
  /**
   * Another identity this one also counts against, in the default tier: a request is admitted
   * only when both admit, and one that either refuses takes nothing from the other. What an
   * unverified credential carries, so that it never earns more than its client IP's budget.
   * @example { key: 'key:Qx3…', within: 'ip:203.0.113.7' }
   */
  within?: string;
}

/**
 * An identifier's answer: an identity, nothing (let the next identifier try), or
 * `'unauthorized'` to answer 401, for an API key that the lookup does not know.
 */
export type IdentifyResult = Identity | 'unauthorized' | null | undefined;

export type Identifier<Req = RequestLike> = (req: Req) => IdentifyResult | Promise<IdentifyResult>;

/** Header values Sentinel reads at most; a longer one is not a credential anyone was issued. */
export const MAX_HEADER_LENGTH = 4096;

/** IPv6 clients' prefix length, unless `byIp` is told otherwise. */
export const DEFAULT_IPV6_SUBNET = 56;

/** A header's first value, trimmed; undefined when absent or empty. */
export function firstValue(req: RequestLike, name: string): string | undefined {
  const raw = req.headers[name];
  return (Array.isArray(raw) ? raw[0] : raw)?.trim() || undefined;
}

export function readHeader(req: RequestLike, name: string): string | undefined {
  const value = firstValue(req, name);
  return value !== undefined && value.length <= MAX_HEADER_LENGTH ? value : undefined;
}

export interface IpOptions {
  /** IPv6 clients are grouped by this prefix length. @default 56 */
  ipv6Subnet?: number;
}

/** Identifies a request by its client IP, as the framework resolved it under trust proxy. */
export function byIp({ ipv6Subnet = DEFAULT_IPV6_SUBNET }: IpOptions = {}): Identifier {
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
