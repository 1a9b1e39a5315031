// Hostile header values never cause a 5xx; Redis keys stay bounded and brace-free, raw keys out.
import { expect, it } from 'vitest';
import {
  byApiKey,
  byHeader,
  byIp,
  chain,
  type Decision,
  type HttpLimiterOptions,
} from '../../packages/core/src/index.ts';
import type { AdapterDriver } from '../adapters/driver.ts';
import {
  type App,
  conformance,
  rawGet,
  redisOf,
  type StoreName,
  type StoreSetup,
  scanKeys,
  startApp,
  useStore,
} from './adapters.ts';

const LONG = 'x'.repeat(10_000);

/** Header sets supertest can send: long, braced, empty, spaced, tilde-led, not-an-IP. */
const SENDABLE: Array<Record<string, string>> = [
  { 'x-api-key': LONG },
  { 'x-tenant-id': LONG },
  { 'x-tenant-id': 't'.repeat(300) },
  { 'x-tenant-id': 't'.repeat(4096) },
  { 'x-api-key': '{}' },
  { 'x-tenant-id': '{}' },
  { 'x-tenant-id': '}{' },
  { 'x-tenant-id': '{tenant}:x' },
  { 'x-tenant-id': 'a}b{c' },
  { 'x-tenant-id': '' },
  { 'x-api-key': '' },
  { 'x-tenant-id': '   ' },
  { 'x-tenant-id': 'two words' },
  { 'x-tenant-id': '~tilde' },
  { 'x-tenant-id': '%E6%BC%A2%7B%7D' },
  { authorization: 'Bearer ' },
  { authorization: 'Bearer {}' },
  { authorization: `Bearer ${LONG}` },
  { 'x-forwarded-for': 'not-an-ip' },
  { 'x-forwarded-for': '{}' },
  { 'x-forwarded-for': '' },
  { 'x-forwarded-for': `${'1.2.3.4, '.repeat(500)}5.6.7.8` },
  { 'x-forwarded-for': 'fe80::1%eth0' },
  { 'x-forwarded-for': '[2001:db8::1]:443' },
  { 'x-forwarded-for': '2001:db8::1%25{}' },
  { 'x-forwarded-for': '::ffff:999.1.1.1' },
];

const line = (text: string) => Buffer.from(text, 'latin1');
const utf8 = (name: string, value: string) =>
  Buffer.concat([line(`${name}: `), Buffer.from(value, 'utf8')]);

/** Requests only a raw socket sends: CR/LF attempts, NUL, raw UTF-8, repeated fields. */
const RAW: Array<{ name: string; lines: Buffer[] }> = [
  { name: 'a bare CR', lines: [line('x-tenant-id: a\rb')] },
  { name: 'a bare LF', lines: [line('x-tenant-id: a\nb')] },
  { name: 'an injected field', lines: [line('x-tenant-id: victim\r\nx-api-key: {injected}')] },
  { name: 'a folded line', lines: [line('x-api-key: first'), line(' {folded}')] },
  { name: 'a NUL byte', lines: [line('x-tenant-id: a\0b')] },
  { name: 'raw UTF-8 in the tenant', lines: [utf8('x-tenant-id', 'tenant-é-漢字-🙂')] },
  { name: 'raw UTF-8 in the API key', lines: [utf8('x-api-key', 'ключ-🔑')] },
  { name: 'raw UTF-8 in a Bearer key', lines: [utf8('authorization', 'Bearer ключ-🔑')] },
  { name: 'latin-1 bytes', lines: [line('x-tenant-id: caf\xe9\xff')] },
  {
    name: 'repeated fields',
    lines: [
      line('x-api-key: one'),
      line('x-api-key: {two}'),
      line('x-tenant-id: a'),
      line('x-tenant-id: }{'),
      line('authorization: Bearer one'),
      line('authorization: Bearer two'),
      line('x-forwarded-for: 198.51.100.9'),
      line('x-forwarded-for: 2001:db8::1'),
    ],
  },
];

/** A distinctive key sent every way a key arrives: header, Bearer, known to the lookup, long. */
const SECRET_KEYS: Array<Record<string, string>> = [
  { 'x-api-key': 'sk_live_SECRET123' },
  { authorization: 'Bearer sk_live_SECRET123' },
  { 'x-api-key': 'sk_live_SECRET123_pro' },
  { 'x-api-key': `sk_live_SECRET123_${'z'.repeat(300)}` },
];

/**
 * API key, then tenant header, then IP: every identifier reads a header under attack. The app
 * fails closed and records every error, so a value that broke identification would show as a
 * 503 and in `errors`, not hide behind fail-open.
 */
async function hostileApp(driver: AdapterDriver, store: StoreSetup, errors: Error[]): Promise<App> {
  return startApp(driver, {
    options: {
      ...store.options,
      // A day's window: a key that took one unit expires once that unit has refilled, 86 s
      // later, so every key written stays for the scan however slowly the requests go.
      limit: 1000,
      window: '1d',
      identify: chain(
        byApiKey({ unknownKey: 'count-unverified' }),
        byHeader('x-tenant-id', { unknownValue: 'count-unverified' }),
        byIp(),
      ),
      onStoreError: 'deny',
      onError: (error) => errors.push(error),
    },
  });
}

async function sendEverything(app: App, errors: Error[]): Promise<void> {
  // A real socket for the raw requests, which supertest refuses to send.
  const url = await app.listen();
  for (const headers of SENDABLE) {
    const reply = await app.get('/', headers);
    expect(reply.status, JSON.stringify(headers).slice(0, 80)).toBe(200);
  }
  for (const { name, lines } of RAW) {
    const status = await rawGet(url, '/', lines);
    expect(status, name).toBeGreaterThanOrEqual(200);
    expect(status, name).toBeLessThan(500);
  }
  expect((await app.get('/')).status).toBe(200);
  expect(errors).toEqual([]);
}

conformance((driver, storeName: StoreName) => {
  it('answers long, braced, empty, CR/LF, unicode and repeated header values without a 5xx', async () => {
    const errors: Error[] = [];
    await sendEverything(await hostileApp(driver, useStore(storeName), errors), errors);
  });
});

conformance(
  (driver) => {
    it('keeps the keys it stores bounded in length and free of braces in the identity', async () => {
      const store = useStore('redis');
      const errors: Error[] = [];
      await sendEverything(await hostileApp(driver, store, errors), errors);
      const keys = await scanKeys(redisOf(store), store.prefix);
      expect(keys.length).toBeGreaterThan(5);
      const shape = /^\{([^{}]{1,200})\}:1000-per-1d:token-bucket$/;
      for (const key of keys) {
        expect(key.startsWith(`${store.prefix}:`)).toBe(true);
        expect(key.slice(store.prefix.length + 1)).toMatch(shape);
        expect(key.length).toBeLessThanOrEqual(store.prefix.length + 1 + 2 + 200 + 24);
        expect(key).not.toContain('x'.repeat(201));
      }
    });

    it('never lets a raw API key reach Redis, the response or the callbacks', async () => {
      const SECRET = 'SECRET123';
      const store = useStore('redis');
      const seen: Decision[] = [];
      const tiered: Partial<HttpLimiterOptions> = {
        tiers: {
          FREE: [
            { limit: 2, window: '1m' },
            { limit: 50, window: '1h', algorithm: 'sliding-window-log' },
          ],
          PRO: { limit: 2, window: '1m', algorithm: 'gcra' },
        },
        onLimited: (_req, decision) => seen.push(decision),
      };
      const lookup = async (key: string) =>
        key === 'sk_live_SECRET123_pro' ? { tenant: 'globex', tier: 'PRO' } : null;
      const apps = [
        // Each unverified key counted by itself (within its IP), so each reaches a store key.
        await startApp(driver, {
          options: {
            ...store.options,
            ...tiered,
            identify: chain(byApiKey({ unknownKey: 'count-unverified' }), byIp()),
          },
        }),
        await startApp(driver, {
          options: {
            ...store.options,
            ...tiered,
            identify: chain(byApiKey({ lookup }), byIp()),
          },
        }),
      ];
      const texts: string[] = [];
      for (const app of apps) {
        for (const headers of SECRET_KEYS) {
          for (let i = 0; i < 3; i++) {
            const reply = await app.get('/', headers);
            expect(reply.status).toBeLessThan(500);
            texts.push(reply.text, JSON.stringify([...reply.headers]));
          }
        }
      }
      expect(seen.length).toBeGreaterThan(0);
      const keys = await scanKeys(redisOf(store), store.prefix);
      expect(keys.length).toBeGreaterThanOrEqual(5);
      const redis = redisOf(store);
      for (const key of keys) {
        const type = await redis.type(key);
        texts.push(key);
        if (type === 'string') texts.push((await redis.get(key)) ?? '');
        else if (type === 'zset') texts.push(...(await redis.zrange(key, '0', '-1', 'WITHSCORES')));
        else throw new Error(`unexpected ${type} at ${key}`);
      }
      texts.push(JSON.stringify(seen));
      for (const text of texts) expect(text).not.toContain(SECRET);
    });
  },
  ['redis'],
);
