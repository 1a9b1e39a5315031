// trustProxy finds the client address as Express's `trust proxy` does: every case is also asked of Express 5's own req.ip.
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { express5 } from '../../../express/test/apps.ts';
import { resolveTrustProxy, type TrustProxy } from '../../src/internal.ts';

/**
 * What Express 5 gives as `req.ip` with `trust proxy` set to `trust`, for a request on a
 * connection from `connection` with `forwardedFor` as its X-Forwarded-For. The request is made on
 * the app's own request prototype, as Express makes every request it handles: `req.ip` reads the
 * header, the socket's address and the app's compiled setting, nothing else (and the suite below
 * checks it against Express on a real socket).
 */
function expressIpWith(trust: TrustProxy): (connection: string, forwardedFor?: string) => unknown {
  const app = express5.app();
  app.set('trust proxy', trust);
  return (connection, forwardedFor) => {
    const headers = forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor };
    const req = Object.create(app.request, {
      headers: { value: headers },
      socket: { value: { remoteAddress: connection } },
    });
    return req.ip;
  };
}

const expressIp = (trust: TrustProxy, connection: string, forwardedFor?: string) =>
  expressIpWith(trust)(connection, forwardedFor);

/** A chain of `count` proxies' entries, all in 10.0.0.0/8, behind one client. */
function longChain(client: string, count: number): string {
  const hops = Array.from({ length: count }, (_, i) => `10.${(i >> 8) & 255}.${i & 255}.1`);
  return [client, ...hops].join(', ');
}

/** The settings Express documents for `trust proxy`, each as Sentinel takes it too. */
const SETTINGS: ReadonlyArray<[string, TrustProxy]> = [
  ['true', true],
  ['false', false],
  ['0 hops', 0],
  ['1 hop', 1],
  ['2 hops', 2],
  ['3 hops', 3],
  ["'loopback'", 'loopback'],
  ["'uniquelocal'", 'uniquelocal'],
  ["'linklocal'", 'linklocal'],
  ["'loopback, uniquelocal' (one string)", 'loopback, uniquelocal'],
  ["['loopback', '10.0.0.0/8']", ['loopback', '10.0.0.0/8']],
  ['one address', '10.0.0.1'],
  ['a CIDR range', '10.0.0.0/8'],
  ['an IPv6 address', '::1'],
  ['an IPv6 range', 'fc00::/7'],
  ['an IPv4-mapped address, as Node prints a dual-stack peer', '::ffff:10.0.0.1'],
  ['an IPv4-mapped range', '::ffff:10.0.0.0/104'],
  ['a function of the address and hop', (address, hop) => address.startsWith('10.') || hop < 1],
];

/** Connections: a proxy on the host, a dual-stack socket's form of it, private and public peers. */
const CONNECTIONS = [
  '127.0.0.1',
  '::1',
  '::ffff:127.0.0.1',
  '10.0.0.1',
  '::ffff:10.0.0.1',
  '192.168.0.3',
  'fd00::1',
  '203.0.113.9',
];

/** X-Forwarded-For values: chains of proxies, IPv6, and what a hostile client writes. */
const HEADERS: ReadonlyArray<[string, string | undefined]> = [
  ['no header', undefined],
  ['an empty header', ''],
  ['one entry', '203.0.113.7'],
  ['a client and a proxy', '203.0.113.7, 10.0.0.2'],
  ['a client and two proxies', '203.0.113.7, 10.0.0.2, 127.0.0.1'],
  ['a chain through every kind', '198.51.100.1, 203.0.113.7, 10.0.0.2, 192.168.0.3, ::1'],
  ['IPv6 entries', '2001:db8::7, fd00::2'],
  ['IPv4-mapped entries', '::ffff:203.0.113.7, ::ffff:10.0.0.2'],
  ['spaces around the entries', '   203.0.113.7  ,  10.0.0.2   '],
  ['entries without spaces', '203.0.113.7,10.0.0.2,127.0.0.1'],
  ['garbage', 'garbage'],
  ['garbage behind a proxy', 'garbage, 10.0.0.2'],
  ['braces', '{}, {tenant}'],
  ['a port and brackets', '[::1]:443, 10.0.0.2:8080'],
  ['two addresses without a comma', '203.0.113.7 10.0.0.2'],
  ['a blank entry', ' '],
  ['a lone comma', ','],
  ['commas only', ',,,'],
  ['a trailing comma', '203.0.113.7, 10.0.0.2,'],
  ['a leading comma', ', 203.0.113.7'],
  ['an empty entry between two', '203.0.113.7,,10.0.0.2'],
  ['a blank entry between two', '203.0.113.7, , 10.0.0.2'],
  ['5000 proxies behind a client', longChain('203.0.113.7', 5000)],
  ['5000 garbage entries', Array(5000).fill('garbage').join(', ')],
  ['5000 empty entries behind a client', `203.0.113.7${','.repeat(5000)}`],
  ['one 60 000-character entry', '7'.repeat(60_000)],
];

describe('trustProxy, as Express 5 reads `trust proxy`', () => {
  it.each(SETTINGS)(
    'finds the address req.ip gives for %s, on every connection and header',
    (_, trust) => {
      const clientAddress = resolveTrustProxy(trust);
      const reqIp = expressIpWith(trust);
      const differences = [];
      let compared = 0;
      for (const connection of CONNECTIONS) {
        for (const [header, forwardedFor] of HEADERS) {
          const express = reqIp(connection, forwardedFor);
          const sentinel = clientAddress(connection, forwardedFor);
          compared++;
          if (sentinel !== express) differences.push({ connection, header, express, sentinel });
        }
      }
      expect(differences).toEqual([]);
      expect(compared).toBe(CONNECTIONS.length * HEADERS.length);
    },
  );

  it('asks a function about the same hops, in the same order, as Express does', () => {
    const asked = (calls: string[]) => (address: string, hop: number) => {
      calls.push(`${hop}:${address}`);
      return !address.startsWith('203.');
    };
    for (const [header, forwardedFor] of HEADERS) {
      const byExpress: string[] = [];
      const bySentinel: string[] = [];
      expressIp(asked(byExpress), '10.0.0.1', forwardedFor);
      resolveTrustProxy(asked(bySentinel))('10.0.0.1', forwardedFor);
      expect(bySentinel, header).toEqual(byExpress);
    }
  });

  it('believes the proxies it is told of, and no further: the settings tell a chain apart', () => {
    // The positive control for the comparison above: the settings give different answers.
    const chain = '198.51.100.1, 203.0.113.7, 10.0.0.2, 192.168.0.3';
    const on = (trust: TrustProxy) => resolveTrustProxy(trust)('127.0.0.1', chain);
    expect(on(false)).toBe('127.0.0.1');
    expect(on(true)).toBe('198.51.100.1');
    expect(on(1)).toBe('192.168.0.3');
    expect(on(3)).toBe('203.0.113.7');
    expect(on('loopback')).toBe('192.168.0.3');
    expect(on(['loopback', 'uniquelocal'])).toBe('203.0.113.7');
    expect(on(['loopback', '192.168.0.3'])).toBe('10.0.0.2');
  });

  it('reads the right-most hops of a 5000-entry header within a millisecond or so', () => {
    const header = longChain('203.0.113.7', 5000);
    const oneHop = resolveTrustProxy(1);
    const started = performance.now();
    for (let i = 0; i < 100; i++) expect(oneHop('10.0.0.1', header)).toBe('10.19.135.1');
    // Typically 0.1 ms for the 100: one entry is read, not 5000.
    expect(performance.now() - started).toBeLessThan(50);
  });
});

describe('trustProxy, where it parts from Express on purpose', () => {
  it('takes a tab beside a comma as the whitespace it is (RFC 9110), where Express keeps it in the address', () => {
    const tabs = '203.0.113.7\t,\t10.0.0.2';
    expect(resolveTrustProxy(1)('127.0.0.1', tabs)).toBe('10.0.0.2');
    expect(expressIp(1, '127.0.0.1', tabs)).toBe('\t10.0.0.2');
    // With spaces, where Express trims too, the two agree.
    expect(expressIp(1, '127.0.0.1', '203.0.113.7 , 10.0.0.2')).toBe('10.0.0.2');
  });

  it('refuses at construction, naming the option, the settings Express takes without a word', () => {
    // Express counts -1 hops as none and 1.5 as two; a netmask it reads as a prefix length.
    expect(expressIp(-1, '127.0.0.1', '203.0.113.7')).toBe('127.0.0.1');
    expect(expressIp(1.5, '127.0.0.1', '203.0.113.7, 10.0.0.2')).toBe('203.0.113.7');
    expect(expressIp('10.0.0.0/255.0.0.0', '10.0.0.1', '203.0.113.7')).toBe('203.0.113.7');
    expect(() => resolveTrustProxy(-1)).toThrow(
      new TypeError('@sentinel/core: `trustProxy` must be a number of hops, 0 or more, got -1'),
    );
    expect(() => resolveTrustProxy(1.5)).toThrow(/`trustProxy` must be a number of hops/);
    expect(() => resolveTrustProxy('10.0.0.0/255.0.0.0')).toThrow(
      /`trustProxy` holds '10.0.0.0\/255.0.0.0', which is not an IP address or CIDR range/,
    );
  });

  it('refuses what Express refuses too, at construction: an entry that is no address', () => {
    expect(() => expressIp('garbage', '127.0.0.1')).toThrow(TypeError);
    expect(() => resolveTrustProxy('garbage')).toThrow(TypeError);
    expect(() => resolveTrustProxy({ proxies: 1 } as never)).toThrow(/`trustProxy` must be true/);
  });

  it('never believes the header without a connection address, which Express always has', () => {
    // A runtime that gives no address (a Next.js route handler without clientIp): nothing shows
    // that the header came through a proxy at all, so it is not read, whatever the setting.
    for (const [, trust] of SETTINGS) {
      expect(resolveTrustProxy(trust)(undefined, '203.0.113.7, 10.0.0.2')).toBeUndefined();
    }
  });
});

describe('trustProxy against Express on a real socket', () => {
  it.each<[TrustProxy, string]>([
    [true, '198.51.100.1, 203.0.113.7'],
    [1, '198.51.100.1, 203.0.113.7'],
    ['loopback', '198.51.100.1, 127.0.0.1'],
    ['loopback', 'garbage, , 127.0.0.1'],
    [false, '198.51.100.1'],
  ])(
    'agrees with the req.ip of an Express 5 app served with %o, for X-Forwarded-For %s',
    async (trust, forwardedFor) => {
      const app = express5.app();
      app.set('trust proxy', trust);
      let connection: string | undefined;
      app.get('/', (req, res) => {
        connection = req.socket.remoteAddress;
        res.json({ ip: req.ip });
      });
      const server = app.listen(0, '127.0.0.1');
      await new Promise((resolve) => server.once('listening', resolve));
      try {
        const { port } = server.address() as AddressInfo;
        const response = await fetch(`http://127.0.0.1:${port}/`, {
          headers: { 'x-forwarded-for': forwardedFor },
        });
        const { ip } = (await response.json()) as { ip: string };
        expect(connection).toBe('127.0.0.1');
        expect(resolveTrustProxy(trust)(connection, forwardedFor)).toBe(ip);
        // And the request made on the app's prototype, which the comparisons above use, too.
        expect(expressIp(trust, '127.0.0.1', forwardedFor)).toBe(ip);
      } finally {
        await new Promise((resolve) => {
          server.close(resolve);
          server.closeAllConnections();
        });
      }
    },
  );
});
