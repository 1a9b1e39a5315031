// Normalises client IPs into rate-limit identities: IPv4 as is, IPv6 grouped by subnet.
import { isIPv4 } from 'node:net';
import ipaddr from 'ipaddr.js';
import { describe, fail } from '../shared/validation.ts';

/**
 * The identity of an IP address: IPv4 addresses (including IPv4-mapped IPv6 ones) as dotted
 * quads, IPv6 addresses as the network of their `/subnet`, since one IPv6 client usually
 * holds a whole /56 or /64 and could otherwise rotate through addresses. Undefined when `ip`
 * is not an address.
 */
export function ipIdentity(ip: string | undefined, subnet: number): string | undefined {
  // A dotted quad without leading zeros is its own identity. Most clients are, and skip the two
  // parses by ipaddr.js, which took a fifth of the Node time of a decision made by address.
  if (ip !== undefined && isIPv4(ip)) return ip;
  const address = clientAddress(ip);
  if (address === undefined) return undefined;
  if (address.kind() === 'ipv6') {
    const v6 = address as ipaddr.IPv6;
    const network = ipaddr.IPv6.networkAddressFromCIDR(`${v6.toNormalizedString()}/${subnet}`);
    return `${network.toString()}/${subnet}`;
  }
  return address.toString();
}

/** An address as ipaddr.js holds it, an IPv4-mapped IPv6 one as IPv4; undefined for no address. */
function clientAddress(ip: string | undefined): ipaddr.IPv4 | ipaddr.IPv6 | undefined {
  if (ip === undefined || !ipaddr.isValid(ip)) return undefined;
  const address = ipaddr.parse(ip);
  if (address.kind() === 'ipv6' && (address as ipaddr.IPv6).isIPv4MappedAddress()) {
    return (address as ipaddr.IPv6).toIPv4Address();
  }
  return address;
}

/**
 * A matcher for addresses and CIDR ranges, IPv4 and IPv6, built once: exact addresses as the
 * strings ipaddr.js prints them, in a set; ranges by family. A client's address is parsed once,
 * and a dotted quad without leading zeros, most clients, not at all unless IPv4 ranges are listed.
 */
export function ipMatcher(
  entries: readonly string[],
  option: string,
): (ip: string | undefined) => boolean {
  if (!Array.isArray(entries)) {
    fail(option, `must be a list of IP addresses or CIDR ranges, got ${describe(entries)}`);
  }
  const exact = new Set<string>();
  const ranges = { ipv4: [] as [ipaddr.IPv4, number][], ipv6: [] as [ipaddr.IPv6, number][] };
  for (const entry of entries as unknown[]) {
    let parsed = false;
    try {
      if (typeof entry === 'string' && entry.includes('/')) {
        const [range, bits] = ipaddr.parseCIDR(entry);
        if (range.kind() === 'ipv4') ranges.ipv4.push([range as ipaddr.IPv4, bits]);
        else ranges.ipv6.push([range as ipaddr.IPv6, bits]);
        parsed = true;
      } else if (typeof entry === 'string') {
        exact.add(ipaddr.parse(entry).toString());
        parsed = true;
      }
    } catch {}
    if (!parsed) fail(option, `holds ${describe(entry)}, which is not an IP address or CIDR range`);
  }
  const inIPv4Range = (v4: ipaddr.IPv4) =>
    ranges.ipv4.some(([range, bits]) => v4.match(range, bits));
  return (ip) => {
    if (ip !== undefined && isIPv4(ip)) {
      if (exact.has(ip)) return true;
      return ranges.ipv4.length > 0 && inIPv4Range(ipaddr.IPv4.parse(ip));
    }
    const address = clientAddress(ip);
    if (address === undefined) return false;
    if (exact.has(address.toString())) return true;
    if (address.kind() === 'ipv4') return inIPv4Range(address as ipaddr.IPv4);
    return ranges.ipv6.some(([range, bits]) => (address as ipaddr.IPv6).match(range, bits));
  };
}
