// Who a request is: tiers by API key (header or Bearer), unknown keys, client IPs and IPv6 subnets.
import { expect, it } from 'vitest';
import {
  type ApiKeyTenant,
  byApiKey,
  byIp,
  chain,
  type HttpLimiterOptions,
} from '../../packages/core/src/index.ts';
import { manualClock } from '../../packages/core/test/stores.ts';
import type { AdapterDriver } from '../adapters/driver.ts';
import {
  type App,
  conformance,
  exposed,
  getMany,
  type StoreName,
  startApp,
  useStore,
} from './adapters.ts';

// The README's running example.
const TIERS = {
  FREE: { limit: 10, window: '1m' },
  PRO: [
    { limit: 100, window: '1m' },
    { limit: 20, window: '1s' },
  ],
  ENTERPRISE: { limit: 1000, window: '1m' },
} satisfies HttpLimiterOptions['tiers'];

/**
 * TIERS with PRO's burst counted per hour: a frozen clock stops refills inside the scripts, but
 * Redis expires a key on its own clock, once the tokens taken would have refilled, 50 ms after one
 * request at 20 a second. A test that reads the burst across requests on a loaded machine needs a
 * key that outlives them.
 */
const HOURLY_BURST_TIERS = {
  ...TIERS,
  PRO: [
    { limit: 100, window: '1m' },
    { limit: 20, window: '1h' },
  ],
} satisfies HttpLimiterOptions['tiers'];

const KEYS: Record<string, ApiKeyTenant> = {
  'sk-free-1': { tenant: 'acme', tier: 'FREE' },
  'sk-free-2': { tenant: 'acme', tier: 'FREE' },
  'sk-pro': { tenant: 'globex', tier: 'PRO' },
  'sk-enterprise': { tenant: 'initech', tier: 'ENTERPRISE' },
};

const FREE_POLICY = '"free-10-per-1m";q=10;w=60';

async function tieredApp(
  driver: AdapterDriver,
  storeName: StoreName,
  unknownKey: 'anonymous' | 'reject' = 'anonymous',
  tiers: HttpLimiterOptions['tiers'] = TIERS,
): Promise<App> {
  const lookup = async (key: string) => KEYS[key] ?? null;
  return startApp(driver, {
    options: {
      // A clock that stands still: no token refills between requests on a slow machine.
      ...useStore(storeName, { clock: manualClock().now }).options,
      tiers,
      identify: chain(byApiKey({ lookup, unknownKey }), byIp()),
    },
  });
}

const from = (ip: string, headers: Record<string, string> = {}) => ({
  'x-forwarded-for': ip,
  ...headers,
});

conformance((driver, storeName) => {
  it("applies the tier the API key's lookup names", async () => {
    const app = await tieredApp(driver, storeName);
    const free = await app.get('/', { 'x-api-key': 'sk-free-1' });
    const pro = await app.get('/', { 'x-api-key': 'sk-pro' });
    const enterprise = await app.get('/', { 'x-api-key': 'sk-enterprise' });
    expect([free, pro, enterprise].map((r) => r.status)).toEqual([200, 200, 200]);
    expect(free.headers.get('ratelimit-policy')).toBe(FREE_POLICY);
    expect(pro.headers.get('ratelimit-policy')).toBe(
      '"pro-100-per-1m";q=100;w=60, "pro-20-per-1s";q=20;w=1',
    );
    expect(enterprise.headers.get('ratelimit-policy')).toBe('"enterprise-1000-per-1m";q=1000;w=60');
    expect([free, pro, enterprise].map((r) => exposed(r)?.tier)).toEqual([
      'FREE',
      'PRO',
      'ENTERPRISE',
    ]);
  });

  it("counts a tenant's keys against one budget and other tenants apart", async () => {
    const app = await tieredApp(driver, storeName);
    const statuses: number[] = [];
    for (let i = 0; i < 12; i++) {
      const key = i % 2 === 0 ? 'sk-free-1' : 'sk-free-2';
      statuses.push((await app.get('/', from('198.51.100.1', { 'x-api-key': key }))).status);
    }
    expect(statuses).toEqual([...Array(10).fill(200), 429, 429]);
    // The same client with a PRO key, and without a key, is someone else.
    expect((await app.get('/', from('198.51.100.1', { 'x-api-key': 'sk-pro' }))).status).toBe(200);
    expect((await app.get('/', from('198.51.100.1'))).status).toBe(200);
  });

  it('reads the key from Authorization: Bearer as from x-api-key', async () => {
    const app = await tieredApp(driver, storeName, 'anonymous', HOURLY_BURST_TIERS);
    const bearer = await app.get('/', { authorization: 'Bearer sk-pro' });
    expect(bearer.status).toBe(200);
    expect(exposed(bearer)?.tier).toBe('PRO');
    const header = await app.get('/', { 'x-api-key': 'sk-pro' });
    // One tenant, one budget: the second request sees the first one's token gone.
    expect(header.headers.get('ratelimit')).toBe('"pro-20-per-1h";r=18;t=360');
    // The burst policy of 20 refuses the 21st request of either form.
    const replies = await getMany(app, 18, '/', { authorization: 'bearer sk-pro' });
    expect(replies.every((r) => r.status === 200)).toBe(true);
    expect((await app.get('/', { 'x-api-key': 'sk-pro' })).status).toBe(429);
  });

  it('puts a request without a key in the default FREE tier, by its IP', async () => {
    const app = await tieredApp(driver, storeName);
    const replies = await getMany(app, 11, '/', from('198.51.100.2'));
    expect(replies.map((r) => r.status)).toEqual([...Array(10).fill(200), 429]);
    expect(replies[0]?.headers.get('ratelimit-policy')).toBe(FREE_POLICY);
    expect(exposed(replies[0])?.tier).toBe('FREE');
    expect((await app.get('/', from('198.51.100.3'))).status).toBe(200);
  });

  it('counts a key too long to have been issued as anonymous by default, like any unknown key', async () => {
    const app = await tieredApp(driver, storeName);
    const long = { 'x-api-key': 'k'.repeat(5000) };
    const replies = await getMany(app, 2, '/', from('198.51.100.5', long));
    expect(replies.map((r) => r.status)).toEqual([200, 200]);
    expect(exposed(replies[1])).toMatchObject({ tier: 'FREE', remaining: 8 });
    // The same address without a key draws from the same budget.
    expect(exposed(await app.get('/', from('198.51.100.5')))?.remaining).toBe(7);
  });

  it('treats an unknown API key as anonymous by default: its IP and the FREE tier', async () => {
    const app = await tieredApp(driver, storeName);
    const unknown = await getMany(app, 6, '/', from('198.51.100.4', { 'x-api-key': 'sk-nobody' }));
    expect(unknown.every((r) => r.status === 200)).toBe(true);
    expect(unknown[0]?.headers.get('ratelimit-policy')).toBe(FREE_POLICY);
    expect(exposed(unknown[0])?.tier).toBe('FREE');
    // Keyless requests from the same address draw from the same budget.
    const keyless = await getMany(app, 5, '/', from('198.51.100.4'));
    expect(keyless.map((r) => r.status)).toEqual([200, 200, 200, 200, 429]);
  });

  it("answers an unknown API key with a 401 problem under unknownKey 'reject'", async () => {
    const app = await tieredApp(driver, storeName, 'reject');
    const rejected = await app.get('/', { 'x-api-key': 'sk-nobody' });
    expect(rejected.status).toBe(401);
    expect(rejected.headers.get('content-type')).toMatch(/^application\/problem\+json\b/);
    expect(rejected.body).toMatchObject({ status: 401, title: 'Unauthorized' });
    expect(rejected.text).not.toContain('sk-nobody');
    const bearer = await app.get('/', { authorization: 'Bearer sk-nobody' });
    expect(bearer.status).toBe(401);
    // A key too long to have been issued is unknown too, however it is sent.
    const long = 'k'.repeat(5000);
    expect((await app.get('/', { 'x-api-key': long })).status).toBe(401);
    expect((await app.get('/', { authorization: `Bearer ${long}` })).status).toBe(401);
    expect((await app.get('/', { 'x-api-key': 'k'.repeat(4000) })).status).toBe(401);
    // Known keys and keyless requests are unaffected.
    expect((await app.get('/', { 'x-api-key': 'sk-pro' })).status).toBe(200);
    expect((await app.get('/')).status).toBe(200);
  });

  it('makes two IPv6 addresses in one /56 share a budget, and another /56 not', async () => {
    const app = await startApp(driver, {
      options: {
        ...useStore(storeName, { clock: manualClock().now }).options,
        limit: 3,
        window: '1m',
      },
    });
    const statuses: number[] = [];
    for (const ip of [
      '2001:db8:abcd:1200::1',
      '2001:db8:abcd:12ff:ffff::2',
      '2001:db8:abcd:1234::',
    ]) {
      statuses.push((await app.get('/', from(ip))).status);
    }
    expect((await app.get('/', from('2001:db8:abcd:12aa::99'))).status).toBe(429);
    expect(statuses).toEqual([200, 200, 200]);
    const neighbour = await app.get('/', from('2001:db8:abcd:1300::1'));
    expect(neighbour.status).toBe(200);
    expect(exposed(neighbour)?.remaining).toBe(2);
  });

  it('ignores X-Forwarded-For when the proxy is not trusted', async () => {
    const app = await startApp(driver, {
      options: {
        ...useStore(storeName, { clock: manualClock().now }).options,
        limit: 2,
        window: '1m',
      },
      trustProxy: false,
    });
    // Each request claims another address; all come from the same socket peer.
    const statuses: number[] = [];
    for (const ip of ['198.51.100.30', '198.51.100.31', '198.51.100.32']) {
      statuses.push((await app.get('/', from(ip))).status);
    }
    expect(statuses).toEqual([200, 200, 429]);
  });

  it('counts an IPv4-mapped IPv6 address as its IPv4 address', async () => {
    const app = await startApp(driver, {
      options: {
        ...useStore(storeName, { clock: manualClock().now }).options,
        limit: 2,
        window: '1m',
      },
    });
    expect((await app.get('/', from('::ffff:198.51.100.20'))).status).toBe(200);
    expect((await app.get('/', from('198.51.100.20'))).status).toBe(200);
    expect((await app.get('/', from('::ffff:198.51.100.20'))).status).toBe(429);
    expect((await app.get('/', from('198.51.100.20'))).status).toBe(429);
    expect((await app.get('/', from('198.51.100.21'))).status).toBe(200);
  });
});
