// The client address behind proxies, for adapters whose framework has no trust-proxy setting of its own (Hono, fetch handlers).
import { describe, fail } from '../shared/validation.ts';
import { ipMatcher } from './client-ip.ts';
import { MAX_HEADER_LENGTH } from './identity.ts';

/**
 * Which proxies in front of the app to believe, as Express's `trust proxy` setting reads it:
 * `false` believes none (the connection's address is the client's); `true` believes every hop
 * (the left-most X-Forwarded-For entry is the client's, which any client can set); a number
 * believes that many hops, counted from the connection; addresses and CIDR ranges (or
 * `'loopback'`, `'linklocal'`, `'uniquelocal'`) believe the proxies at those addresses; a function
 * is asked about each hop, from the connection outwards.
 */
export type TrustProxy =
  | boolean
  | number
  | string
  | readonly string[]
  | ((address: string, hop: number) => boolean);

/** The named ranges Express's `trust proxy` accepts beside addresses. */
const NAMED_RANGES: Record<string, readonly string[]> = {
  loopback: ['127.0.0.1/8', '::1/128'],
  linklocal: ['169.254.0.0/16', 'fe80::/10'],
  uniquelocal: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7'],
};

/** Resolves a client address from the connection's and an X-Forwarded-For value. */
export type ClientAddress = (
  connection: string | undefined,
  forwardedFor: string | null | undefined,
) => string | undefined;

const connectionOnly: ClientAddress = (connection) => connection;

/** Checks `trustProxy` once and returns how each request's client address is found. */
export function resolveTrustProxy(
  trust: TrustProxy | undefined,
  option = 'trustProxy',
): ClientAddress {
  if (trust === undefined || trust === false) return connectionOnly;
  const trusted = hopTrust(trust, option);
  return function clientAddress(connection, forwardedFor) {
    if (connection === undefined || !forwardedFor) return connection;
    // Longer than any proxy chain a request was sent through: only its sender wrote it.
    if (forwardedFor.length > MAX_HEADER_LENGTH) return connection;
    const hops = forwardedFor.split(',');
    // From the connection outwards, while each address is a proxy we believe.
    let address = connection;
    for (let hop = 0; hop < hops.length; hop++) {
      if (!trusted(address, hop)) return address;
      address = (hops[hops.length - 1 - hop] as string).trim();
    }
    return address;
  };
}

function hopTrust(trust: TrustProxy, option: string): (address: string, hop: number) => boolean {
  if (trust === true) return () => true;
  if (typeof trust === 'number') {
    if (!Number.isSafeInteger(trust) || trust < 0) {
      fail(option, `must be a number of hops, 0 or more, got ${describe(trust)}`);
    }
    return (_, hop) => hop < trust;
  }
  if (typeof trust === 'function') return trust;
  const entries = typeof trust === 'string' ? trust.split(',').map((entry) => entry.trim()) : trust;
  if (!Array.isArray(entries)) {
    fail(
      option,
      `must be true, false, a number of hops, addresses or CIDR ranges, or a function, got ${describe(trust)}`,
    );
  }
  const ranges = entries.flatMap((entry) =>
    typeof entry === 'string' && entry in NAMED_RANGES ? (NAMED_RANGES[entry] ?? []) : [entry],
  );
  const matches = ipMatcher(ranges, option);
  return (address) => matches(address);
}
