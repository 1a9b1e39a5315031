// A tenant's own limits from the key lookup: applied in place of its tier, changed at run time
// without a restart, and a bad record reported rather than turned into a 5xx.
import { setTimeout as sleep } from 'node:timers/promises';
import { expect, it } from 'vitest';
import { uniquePrefix } from '../../../../test/harness/clients.ts';
import { type ApiKeyTenant, byApiKey, createHttpLimiter, MemoryStore } from '../../src/index.ts';

const clock = () => Date.UTC(2026, 0, 1);
const request = { headers: { 'x-api-key': 'acme-key' }, ip: '203.0.113.9' };

function gateway(records: Map<string, ApiKeyTenant>, onError?: (error: Error) => void) {
  return createHttpLimiter({
    store: new MemoryStore({ clock }),
    prefix: uniquePrefix('own-policies'),
    tiers: { FREE: { name: 'free', limit: 2, window: '1h' } },
    identify: byApiKey({ lookup: (key) => records.get(key) ?? null, cacheTtlMs: 20 }),
    onError,
  });
}

const contract = (limit: number) =>
  ({ name: 'acme-contract', limit, window: '1h', algorithm: 'fixed-window' }) as const;

it("takes a tenant's new contract limit from the lookup without a restart, keeping what it used", async () => {
  const records = new Map<string, ApiKeyTenant>([
    ['acme-key', { tenant: 'acme', tier: 'FREE', policies: contract(3) }],
  ]);
  const limiter = gateway(records);
  const statuses = async (times: number) => {
    const seen = [];
    for (let i = 0; i < times; i++) {
      const verdict = await limiter.check(request);
      seen.push(verdict.action === 'next' ? 200 : verdict.status);
    }
    return seen;
  };
  expect(await statuses(4)).toEqual([200, 200, 200, 429]);
  const refused = await limiter.check(request);
  expect(refused.headers['RateLimit-Policy']).toBe('"acme-contract";q=3;w=3600');

  // The record changes in the database; the lookup's cached answer expires after 20 ms.
  records.set('acme-key', { tenant: 'acme', tier: 'FREE', policies: contract(5) });
  await sleep(100);
  expect(await statuses(3)).toEqual([200, 200, 429]);
  await limiter.close();
});

it('reports a record with bad policies and lets the request through, never a 5xx', async () => {
  const errors: Error[] = [];
  const records = new Map<string, ApiKeyTenant>([
    ['acme-key', { tenant: 'acme', policies: { limit: 0, window: '1h' } }],
  ]);
  const limiter = gateway(records, (error) => errors.push(error));
  expect(await limiter.check(request)).toMatchObject({ action: 'next' });
  expect(errors).toEqual([
    expect.objectContaining({
      name: 'TypeError',
      message: expect.stringMatching(/`policies\.limit`/),
    }),
  ]);
  await limiter.close();
});
