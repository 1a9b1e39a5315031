// The client address behind proxies, for adapters whose framework has no trust-proxy setting of its own (Hono, fetch handlers).

import ipaddr from 'ipaddr.js';
import { describe, fail } from '../shared/validation.ts';
import { ipMatcher } from './client-ip.ts';

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
    // From the connection outwards, while each address is a proxy we believe. Entries are read
    // from the right, one at a time, so that a long header costs only the hops believed; an
    // empty entry is no hop, as Express's parser drops it.
    let address = connection;
    let hop = 0;
    let end = forwardedFor.length;
    while (end > 0) {
      const comma = forwardedFor.lastIndexOf(',', end - 1);
      const entry = forwardedFor.slice(comma + 1, end).trim();
      end = comma;
      if (entry === '') continue;
      if (!trusted(address, hop++)) return address;
      address = entry;
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
  // Anything but a string is left to ipMatcher, which names it.
  const ranges = entries.flatMap((entry) => {
    if (typeof entry !== 'string') return [entry];
    return entry in NAMED_RANGES ? (NAMED_RANGES[entry] ?? []) : [asIPv4(entry)];
  });
  const matches = ipMatcher(ranges, option);
  return (address) => matches(address);
}

/**
 * An IPv4-mapped entry as the IPv4 address or range it stands for, as Express compiles it:
 * '::ffff:10.0.0.1', the form in which Node gives a dual-stack socket's IPv4 peer, trusts
 * 10.0.0.1, and '::ffff:10.0.0.0/104' trusts 10.0.0.0/8. Anything else is left to ipMatcher.
 */
function asIPv4(entry: string): string {
  if (!entry.includes(':')) return entry;
  try {
    const [address, bits] = entry.includes('/')
      ? ipaddr.parseCIDR(entry)
      : [ipaddr.parse(entry), 128];
    if (address.kind() !== 'ipv6' || bits < 96) return entry;
    const v6 = address as ipaddr.IPv6;
    if (!v6.isIPv4MappedAddress()) return entry;
    const v4 = v6.toIPv4Address().toString();
    return entry.includes('/') ? `${v4}/${bits - 96}` : v4;
  } catch {
    return entry;
  }
}
