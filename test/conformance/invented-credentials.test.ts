// A client that invents who it is stays inside its limit: API keys, Bearer, tenant headers, addresses.
import { randomUUID } from 'node:crypto';
import { expect, it } from 'vitest';
import {
  type ApiKeyTenant,
  byApiKey,
  byHeader,
  byIp,
  chain,
  type HttpLimiterOptions,
} from '../../packages/core/src/index.ts';
import { manualClock } from '../../packages/core/test/stores.ts';
import type { AdapterDriver } from '../adapters/driver.ts';
import { type App, conformance, exposed, type StoreName, startApp, useStore } from './adapters.ts';

const KEYS: Record<string, ApiKeyTenant> = { 'sk-known': { tenant: 'acme' } };
const lookup = async (key: string) => KEYS[key] ?? null;

/** 10 a minute, on a clock that stands still: no refill between requests on a slow machine. */
async function appWith(
  driver: AdapterDriver,
  storeName: StoreName,
  identify?: HttpLimiterOptions['identify'],
  trustProxy?: boolean | 'loopback',
): Promise<App> {
  const options: HttpLimiterOptions = {
    // Who is counted is the question here, not a slow Redis: a deadline a loaded machine cannot
    // miss keeps fail-open answers out of the counts (the failure suites cover those).
    ...useStore(storeName, { clock: manualClock().now, timeout: 1000 }).options,
    limit: 10,
    window: '1m',
  };
  if (identify !== undefined) options.identify = identify;
  return startApp(driver, trustProxy === undefined ? { options } : { options, trustProxy });
}

const from = (ip: string, headers: Record<string, string> = {}) => ({
  'x-forwarded-for': ip,
  ...headers,
});

/** 60 requests at once from one IP, each with a credential nobody issued; the admitted count. */
async function admittedOf60(
  app: App,
  ip: string,
  credential: (i: number) => Record<string, string>,
) {
  const replies = await Promise.all(
    Array.from({ length: 60 }, (_, i) => app.get('/', from(ip, credential(i)))),
  );
  expect(replies.every((reply) => reply.status === 200 || reply.status === 429)).toBe(true);
  const admitted = replies.filter((reply) => reply.status === 200);
  expect(admitted.filter((reply) => exposed(reply)?.degraded !== undefined)).toEqual([]);
  return admitted.length;
}

const invented = {
  'x-api-key': () => ({ 'x-api-key': `sk-${randomUUID()}` }),
  bearer: () => ({ authorization: `Bearer sk-${randomUUID()}` }),
};

conformance((driver, storeName) => {
  it.each(Object.entries(invented))(
    'admits at most the limit to 60 invented keys from one IP under the default options, by %s',
    async (_, credential) => {
      const app = await appWith(driver, storeName);
      expect(await admittedOf60(app, '198.51.100.60', credential)).toBe(10);
      // The same IP without a key finds its budget spent; another IP has its own.
      expect((await app.get('/', from('198.51.100.60'))).status).toBe(429);
      expect((await app.get('/', from('198.51.100.61', credential()))).status).toBe(200);
    },
  );

  it.each(Object.entries(invented))(
    'counts unknown keys by IP with a lookup, and keeps a known key its tenant budget, by %s',
    async (_, credential) => {
      const app = await appWith(driver, storeName, chain(byApiKey({ lookup }), byIp()));
      expect(await admittedOf60(app, '198.51.100.62', credential)).toBe(10);
      // The tenant's key, from the same exhausted IP, draws on the tenant's own 10.
      const known = [];
      for (let i = 0; i < 11; i++) {
        const headers: Record<string, string> =
          i % 2 ? { authorization: 'Bearer sk-known' } : { 'x-api-key': 'sk-known' };
        known.push((await app.get('/', from('198.51.100.62', headers))).status);
      }
      expect(known).toEqual([...Array(10).fill(200), 429]);
    },
  );

  it('counts keys that differ from a known one only in case as unknown, and trims whitespace', async () => {
    const app = await appWith(driver, storeName, chain(byApiKey({ lookup }), byIp()));
    const variants = ['SK-KNOWN', 'Sk-Known', 'sk-known\t', ' sk-known', 'sk-known '];
    const replies = [];
    for (const key of variants)
      replies.push(await app.get('/', from('198.51.100.63', { 'x-api-key': key })));
    // Case makes another key, which nobody issued: the IP's budget. Whitespace around a key is
    // not part of it: the tenant's.
    expect(replies.map((reply) => exposed(reply)?.remaining)).toEqual([9, 8, 9, 8, 7]);
    expect((await app.get('/', from('198.51.100.63'))).headers.get('ratelimit')).toMatch(/r=7;/);
  });

  it.each(Object.entries(invented))(
    "holds 60 invented keys to the IP's budget under unknownKey 'count-unverified', by %s",
    async (_, credential) => {
      const identify = chain(byApiKey({ unknownKey: 'count-unverified' }), byIp());
      const app = await appWith(driver, storeName, identify);
      expect(await admittedOf60(app, '198.51.100.64', credential)).toBe(10);
      expect((await app.get('/', from('198.51.100.64'))).status).toBe(429);
    },
  );

  it("gives an opted-in unverified key a budget of its own, never more than its IP's", async () => {
    const identify = chain(byApiKey({ unknownKey: 'count-unverified' }), byIp());
    const app = await appWith(driver, storeName, identify);
    const key = { 'x-api-key': 'sk-made-up' };
    // Its own 10 from one IP, which that IP's budget also held: keyless requests there are refused.
    const first = [];
    for (let i = 0; i < 11; i++)
      first.push((await app.get('/', from('198.51.100.65', key))).status);
    expect(first).toEqual([...Array(10).fill(200), 429]);
    expect((await app.get('/', from('198.51.100.65'))).status).toBe(429);
    // From a second IP the key's own budget refuses, and what that IP's budget took comes back.
    expect((await app.get('/', from('198.51.100.66', key))).status).toBe(429);
    await expect
      .poll(async () => exposed(await app.get('/', from('198.51.100.67')))?.remaining)
      .toBe(9);
    const keyless = [];
    for (let i = 0; i < 10; i++) keyless.push((await app.get('/', from('198.51.100.66'))).status);
    expect(keyless).toEqual(Array(10).fill(200));
  });

  it('holds invented tenant ids to the IP budget, with a lookup or counted within the IP', async () => {
    const tenants = (id: string) => (id === 'known' ? { tenant: 'known' } : null);
    for (const identify of [
      chain(byHeader('x-tenant-id', { lookup: tenants }), byIp()),
      chain(byHeader('x-tenant-id', { unknownValue: 'count-unverified' }), byIp()),
    ]) {
      const app = await appWith(driver, storeName, identify);
      const admitted = await admittedOf60(app, '198.51.100.68', () => ({
        'x-tenant-id': randomUUID(),
      }));
      expect(admitted).toBe(10);
    }
  });

  it('admits at most the limit to 60 addresses rotated inside one IPv6 /56', async () => {
    const app = await appWith(driver, storeName);
    const hex = () => Math.floor(Math.random() * 0x10000).toString(16);
    const replies = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        // 2001:db8:77:4400::/56: the fourth group's low byte and the last four groups rotate.
        app.get(
          '/',
          from(
            `2001:db8:77:44${(i % 256).toString(16).padStart(2, '0')}:${hex()}:${hex()}:${hex()}:${hex()}`,
          ),
        ),
      ),
    );
    expect(replies.filter((reply) => reply.status === 200)).toHaveLength(10);
    expect((await app.get('/', from('2001:db8:77:4500::1'))).status).toBe(200);
  });

  it('admits at most the limit to spoofed X-Forwarded-For entries behind one trusted proxy', async () => {
    // The client writes the first entries; the one proxy the app trusts appends the address it
    // saw, which is all the framework believes.
    const app = await appWith(driver, storeName, undefined, 'loopback');
    const replies = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        app.get('/', { 'x-forwarded-for': `10.${i}.0.1, 192.0.2.${i}, 198.51.100.70` }),
      ),
    );
    expect(replies.filter((reply) => reply.status === 200)).toHaveLength(10);
    expect(exposed(await app.get('/', { 'x-forwarded-for': '198.51.100.71' }))?.remaining).toBe(9);
  });

  it('admits at most the limit to spoofed X-Forwarded-For entries when no proxy is trusted', async () => {
    const app = await appWith(driver, storeName, undefined, false);
    const replies = await Promise.all(
      Array.from({ length: 60 }, (_, i) => app.get('/', { 'x-forwarded-for': `192.0.2.${i}` })),
    );
    expect(replies.filter((reply) => reply.status === 200)).toHaveLength(10);
  });
});
