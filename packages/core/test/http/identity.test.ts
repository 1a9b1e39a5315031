// Identifiers: API keys hashed and looked up once, tenant headers, client IPs grouped, chains.
import { describe, expect, it } from 'vitest';
import {
  byApiKey,
  byHeader,
  byIp,
  chain,
  fingerprint,
  ipIdentity,
  ipMatcher,
  storageIdentity,
} from '../../src/index.ts';
import { FingerprintCache } from '../../src/shared/fingerprint.ts';

const request = (headers: Record<string, string | string[]>, ip?: string) => ({ headers, ip });

describe('byApiKey', () => {
  it('reads x-api-key and Authorization: Bearer, and keeps only a hash of the key', async () => {
    const identify = byApiKey({ unknownKey: 'count-unverified' });
    const fromHeader = await identify(request({ 'x-api-key': 'sk_live_SECRET' }, '203.0.113.9'));
    const fromBearer = await identify(
      request({ authorization: 'Bearer sk_live_SECRET' }, '203.0.113.9'),
    );
    expect(fromHeader).toEqual({
      key: `key:${fingerprint('sk_live_SECRET')}`,
      within: 'ip:203.0.113.9',
    });
    expect(fromBearer).toEqual(fromHeader);
    expect(JSON.stringify(fromHeader)).not.toContain('SECRET');
  });

  it("counts an unverified key within its client IP's identity, or within anonymous without one", async () => {
    const identify = byApiKey({ unknownKey: 'count-unverified', lookup: () => null });
    expect(await identify(request({ 'x-api-key': 'k' }, '2001:db8:aa:bbcc::1'))).toEqual({
      key: `key:${fingerprint('k')}`,
      within: 'ip:2001:db8:aa:bb00::/56',
    });
    expect(await identify(request({ 'x-api-key': 'k' }))).toEqual({
      key: `key:${fingerprint('k')}`,
      within: 'anonymous',
    });
    // Every key too long to have been issued shares one budget, within its IP.
    expect(await identify(request({ 'x-api-key': 'k'.repeat(5000) }, '203.0.113.9'))).toEqual({
      key: 'key:too-long',
      within: 'ip:203.0.113.9',
    });
  });

  it('tells the identity of a key outside any request with identityOf', async () => {
    const identify = byApiKey({
      lookup: (key) => (key === 'sk-pro' ? { tenant: 'acme', tier: 'PRO' } : null),
    });
    expect(await identify.identityOf('sk-pro')).toEqual({ key: 'tenant:acme', tier: 'PRO' });
    expect(await identify.identityOf(' sk-pro ')).toEqual({ key: 'tenant:acme', tier: 'PRO' });
    expect(await identify.identityOf('sk-nobody')).toBeNull();
    expect(await identify.identityOf('')).toBeNull();
    const rejecting = byApiKey({ lookup: () => null, unknownKey: 'reject' });
    expect(await rejecting.identityOf('sk-nobody')).toBe('unauthorized');
    // An unverified key's budget depends on the IP a request comes from: none outside one.
    expect(await byApiKey({ unknownKey: 'count-unverified' }).identityOf('k')).toBeNull();
    expect(() => identify.identityOf(42 as never)).toThrow(TypeError);
  });

  it('yields nothing without a key, for an empty one, or for one longer than any credential', async () => {
    const identify = byApiKey({ lookup: () => ({ tenant: 't' }) });
    expect(await identify(request({}))).toBeNull();
    expect(await identify(request({ 'x-api-key': '  ' }))).toBeNull();
    expect(await identify(request({ authorization: 'Basic abc' }))).toBeNull();
    expect(await identify(request({ 'x-api-key': 'k'.repeat(5000) }))).toBeNull();
  });

  it('maps keys to tenants and tiers through a lookup asked once per key', async () => {
    const asked: string[] = [];
    const identify = byApiKey({
      lookup: async (key) => {
        asked.push(key);
        return key === 'pro-key' ? { tenant: 'acme', tier: 'PRO' } : null;
      },
    });
    const answers = await Promise.all(
      [1, 2, 3].map(() => identify(request({ 'x-api-key': 'pro-key' }))),
    );
    expect(answers).toEqual([1, 2, 3].map(() => ({ key: 'tenant:acme', tier: 'PRO' })));
    expect(await identify(request({ 'x-api-key': 'nobody' }))).toBeNull();
    expect(await identify(request({ 'x-api-key': 'nobody' }))).toBeNull();
    expect(asked).toEqual(['pro-key', 'nobody']);
  });

  it("answers 'unauthorized' for an unknown key when told to reject", async () => {
    const identify = byApiKey({ lookup: () => null, unknownKey: 'reject' });
    expect(await identify(request({ 'x-api-key': 'nobody' }))).toBe('unauthorized');
  });

  it("rejects a key too long to have been issued under 'reject', in a header or as Bearer", async () => {
    const asked: string[] = [];
    const lookup = (key: string) => {
      asked.push(key);
      return key.length === 4000 ? { tenant: 'long' } : null;
    };
    const identify = byApiKey({ lookup, unknownKey: 'reject' });
    const long = 'k'.repeat(5000);
    expect(await identify(request({ 'x-api-key': long }))).toBe('unauthorized');
    expect(await identify(request({ authorization: `Bearer ${long}` }))).toBe('unauthorized');
    expect(await identify(request({ 'x-api-key': 'k'.repeat(4000) }))).toEqual({
      key: 'tenant:long',
    });
    // Never asked about: no key that long was ever issued.
    expect(asked.map((key) => key.length)).toEqual([4000]);
    // Anonymous by default, as an unknown key of any length is.
    expect(await byApiKey({ lookup })(request({ 'x-api-key': long }))).toBeNull();
  });

  it('asks again after a lookup that failed', async () => {
    let calls = 0;
    const identify = byApiKey({
      lookup: async () => {
        calls++;
        if (calls === 1) throw new Error('database down');
        return { tenant: 't' };
      },
    });
    await expect(identify(request({ 'x-api-key': 'k' }))).rejects.toThrow('database down');
    expect(await identify(request({ 'x-api-key': 'k' }))).toEqual({ key: 'tenant:t' });
  });

  it.each([
    [{ header: 'bad header' }, '`byApiKey.header`'],
    [{ unknownKey: 'ignore' }, '`byApiKey.unknownKey`'],
    [{ lookup: 'db' }, '`byApiKey.lookup`'],
    [{ cacheSize: 0, lookup: () => null }, '`byApiKey.cacheSize`'],
    [{ unknownKey: 'reject' }, /`byApiKey.unknownKey` 'reject' needs a `lookup`/],
    // Without a lookup nothing confirms a key, so a client could invent one per request.
    [{}, /`byApiKey.lookup` is needed: .* `unknownKey: 'count-unverified'`/],
    [{ unknownKey: 'anonymous' }, '`byApiKey.lookup` is needed'],
  ])('rejects %j at construction', (options, option) => {
    expect(() => byApiKey(options as never)).toThrow(TypeError);
    expect(() => byApiKey(options as never)).toThrow(option);
  });
});

describe('byHeader', () => {
  it('identifies by a trusted header, with an optional tier, reading the first of repeated values', async () => {
    const trusted = { trusted: true };
    expect(await byHeader('X-Tenant-Id', trusted)(request({ 'x-tenant-id': 'acme' }))).toEqual({
      key: 'x-tenant-id:acme',
    });
    expect(
      await byHeader('x-tenant-id', { ...trusted, tier: 'PRO' })(
        request({ 'x-tenant-id': ['a', 'b'] }),
      ),
    ).toEqual({ key: 'x-tenant-id:a', tier: 'PRO' });
    expect(await byHeader('x-tenant-id', trusted)(request({}))).toBeNull();
  });

  it('confirms a tenant through a lookup, asked once per value, and counts the rest as told', async () => {
    const asked: string[] = [];
    const lookup = (id: string) => {
      asked.push(id);
      return id === 'acme' ? { tenant: 'acme-corp' } : null;
    };
    const identify = byHeader('x-tenant-id', { lookup, tier: 'PRO' });
    const acme = request({ 'x-tenant-id': 'acme' }, '203.0.113.9');
    expect(await identify(acme)).toEqual({ key: 'tenant:acme-corp', tier: 'PRO' });
    expect(await identify(acme)).toEqual({ key: 'tenant:acme-corp', tier: 'PRO' });
    const other = request({ 'x-tenant-id': 'made-up' }, '203.0.113.9');
    expect(await identify(other)).toBeNull();
    expect(asked).toEqual(['acme', 'made-up']);
    expect(await byHeader('x-tenant-id', { lookup, unknownValue: 'reject' })(other)).toBe(
      'unauthorized',
    );
    expect(
      await byHeader('x-tenant-id', { lookup, unknownValue: 'count-unverified' })(other),
    ).toEqual({ key: 'x-tenant-id:made-up', within: 'ip:203.0.113.9' });
    expect(await byHeader('x-tenant-id', { unknownValue: 'count-unverified' })(acme)).toEqual({
      key: 'x-tenant-id:acme',
      within: 'ip:203.0.113.9',
    });
  });

  it.each([
    [{}, /`byHeader.lookup` is needed: .*`trusted: true`/],
    [{ unknownValue: 'reject' }, /`byHeader.unknownValue` 'reject' needs a `lookup`/],
    [{ trusted: true, lookup: () => null }, '`byHeader.trusted`'],
    [{ trusted: 'yes' }, '`byHeader.trusted`'],
    [{ trusted: true, tier: 5 }, '`byHeader.tier`'],
    [{ unknownValue: 'ignore' }, '`byHeader.unknownValue`'],
  ])('rejects %j at construction', (options, message) => {
    expect(() => byHeader('x-tenant-id', options as never)).toThrow(TypeError);
    expect(() => byHeader('x-tenant-id', options as never)).toThrow(message);
  });
});

describe('byIp', () => {
  it.each([
    ['203.0.113.7', 'ip:203.0.113.7'],
    ['::ffff:203.0.113.7', 'ip:203.0.113.7'],
    ['2001:db8:aa:bb00::1', 'ip:2001:db8:aa:bb00::/56'],
    ['2001:db8:aa:bbff:ffff::9', 'ip:2001:db8:aa:bb00::/56'],
    ['2001:db8:aa:cc00::1', 'ip:2001:db8:aa:cc00::/56'],
    // IPv4 written other ways (leading zeros, octal, hex, short forms) counts as its dotted quad.
    ['010.0.0.1', 'ip:8.0.0.1'],
    ['1.2.3.04', 'ip:1.2.3.4'],
    ['0x7f.0.0.1', 'ip:127.0.0.1'],
    ['127.1', 'ip:127.0.0.1'],
  ])('groups %s as %s', async (ip, key) => {
    expect(await byIp()(request({}, ip))).toEqual({ key });
  });

  it('takes another IPv6 prefix length, and yields nothing without an address', async () => {
    expect(ipIdentity('2001:db8:aa:bbcc::1', 64)).toBe('2001:db8:aa:bbcc::/64');
    expect(await byIp()(request({}, undefined))).toBeNull();
    expect(await byIp()(request({}, 'not-an-ip'))).toBeNull();
    expect(() => byIp({ ipv6Subnet: 0 })).toThrow(/`byIp.ipv6Subnet`/);
  });
});

describe('chain', () => {
  it('takes the first identifier that yields', async () => {
    const identify = chain(
      byApiKey({ lookup: () => null }),
      byHeader('x-tenant-id', { trusted: true }),
      byIp(),
    );
    expect(await identify(request({ 'x-tenant-id': 't' }, '198.51.100.1'))).toEqual({
      key: 'x-tenant-id:t',
    });
    expect(await identify(request({}, '198.51.100.1'))).toEqual({ key: 'ip:198.51.100.1' });
    expect(await identify(request({}))).toBeNull();
  });

  it('answers synchronously while its identifiers do, and waits for one that returns a promise', async () => {
    const later = async (req: { headers: Record<string, unknown> }) =>
      req.headers['x-late'] === undefined ? null : { key: 'late' };
    const identify = chain(byApiKey({ unknownKey: 'count-unverified' }), later, byIp());
    expect(identify(request({ 'x-api-key': 'k' }))).toEqual({
      key: `key:${fingerprint('k')}`,
      within: 'anonymous',
    });
    const waited = identify(request({}, '198.51.100.1'));
    expect(waited).toBeInstanceOf(Promise);
    expect(await waited).toEqual({ key: 'ip:198.51.100.1' });
    expect(await identify(request({ 'x-late': '1' }, '198.51.100.1'))).toEqual({ key: 'late' });
  });

  // A lookup may hand back another library's promise: a thenable that yields nothing must pass
  // the request on to the next identifier, as a promise that yields nothing does.
  it('waits for a thenable as for a promise, and goes on when it yields nothing', async () => {
    const thenable = (value: { key: string } | null) => ({
      // biome-ignore lint/suspicious/noThenProperty: the point of the test is a non-Promise thenable
      then: (resolve: (found: { key: string } | null) => void) => resolve(value),
    });
    const lookup = (req: { headers: Record<string, unknown> }) =>
      thenable(req.headers['x-late'] === undefined ? null : { key: 'late' }) as never;
    const identify = chain(lookup, byIp());
    expect(await identify(request({}, '198.51.100.1'))).toEqual({ key: 'ip:198.51.100.1' });
    expect(await identify(request({ 'x-late': '1' }, '198.51.100.1'))).toEqual({ key: 'late' });
  });
});

describe('FingerprintCache', () => {
  it('gives the fingerprint of each value, holding at most its size', () => {
    const cache = new FingerprintCache(2);
    for (const value of ['a', 'b', 'a', 'c', 'a', 'b']) {
      expect(cache.of(value)).toBe(fingerprint(value));
    }
    expect(cache.size).toBe(2);
  });
});

describe('identities in store keys', () => {
  it('stay readable when short printable ASCII', () => {
    expect(storageIdentity('ip:203.0.113.7')).toBe('ip:203.0.113.7');
    expect(storageIdentity('ip:2001:db8::/56')).toBe('ip:2001:db8::/56');
  });

  it.each([
    ['a{b}'],
    ['}{'],
    ['with space'],
    ['línea'],
    ['a\r\nb'],
    ['x'.repeat(201)],
    ['y'.repeat(513)],
    [''],
    ['~abc'],
  ])('are fingerprinted when odd: %j', (key) => {
    const stored = storageIdentity(key);
    expect(stored).toMatch(/^~[A-Za-z0-9_-]{22}$/);
    expect(stored).toBe(`~${fingerprint(key)}`);
    // Asked again, from the cache or not, the same.
    expect(storageIdentity(key)).toBe(stored);
  });
});

describe('ipMatcher', () => {
  it('matches addresses and ranges of both families, IPv4-mapped ones as IPv4', () => {
    const allowed = ipMatcher(['10.0.0.0/8', '2001:db8::/32', '192.0.2.1'], 'allowList');
    expect(allowed('10.1.2.3')).toBe(true);
    expect(allowed('::ffff:10.1.2.3')).toBe(true);
    expect(allowed('2001:db8:1::1')).toBe(true);
    expect(allowed('192.0.2.1')).toBe(true);
    expect(allowed('192.0.2.2')).toBe(false);
    expect(allowed(undefined)).toBe(false);
    expect(() => ipMatcher(['nope'], 'allowList')).toThrow(/`allowList`/);
  });

  // Exact entries are compared as ipaddr.js prints addresses: any spelling of one address on
  // either side matches it. A range matches clients of its own family only.
  it('matches an exact address however either side spells it', () => {
    const allowed = ipMatcher(['2001:DB8:0:0::1', '198.51.100.7', '0300.0.2.1'], 'allowList');
    expect(allowed('2001:db8::1')).toBe(true);
    expect(allowed('2001:db8::2')).toBe(false);
    expect(allowed('198.51.100.7')).toBe(true);
    expect(allowed('::ffff:198.51.100.7')).toBe(true);
    expect(allowed('0xc6.51.100.7')).toBe(true);
    expect(allowed('192.0.2.1')).toBe(true);
    expect(allowed('198.51.100.8')).toBe(false);
    expect(allowed('not an address')).toBe(false);
    expect(ipMatcher(['2001:db8::/32'], 'allowList')('10.1.2.3')).toBe(false);
    expect(ipMatcher(['10.0.0.0/8'], 'allowList')('2001:db8::1')).toBe(false);
    expect(() => ipMatcher([42 as unknown as string], 'allowList')).toThrow(/`allowList`/);
  });
});
