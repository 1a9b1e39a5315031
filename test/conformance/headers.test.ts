// The exact RateLimit header strings of every format, and a structured-field parse of ours.
import { parseDictionary, parseList } from 'structured-headers';
import { expect, it } from 'vitest';
import type { HttpLimiterOptions } from '../../packages/core/src/index.ts';
import { manualClock } from '../../packages/core/test/stores.ts';
import type { AdapterDriver } from '../adapters/driver.ts';
import {
  conformance,
  getMany,
  type Reply,
  rateLimitHeaderNames,
  type StoreName,
  startApp,
  useStore,
} from './adapters.ts';

const FREE = { name: 'free-minute', limit: 10, window: '1m' } as const;

/**
 * Seven requests against 10 per minute under a clock that stands still: a token bucket then
 * holds 3, and is full again in 7 × 6 s = 42 s, as in the example.
 */
async function seventh(
  driver: AdapterDriver,
  storeName: StoreName,
  extra: Partial<HttpLimiterOptions> = {},
): Promise<Reply> {
  const clock = manualClock(START);
  const app = await startApp(driver, {
    options: { ...useStore(storeName, { clock: clock.now }).options, policies: FREE, ...extra },
  });
  const replies = await getMany(app, 7);
  expect(replies.map((r) => r.status)).toEqual(Array(7).fill(200));
  return replies[6] as Reply;
}

function pick(reply: Reply, names: readonly string[]): Record<string, string | null> {
  return Object.fromEntries(names.map((name) => [name, reply.headers.get(name)]));
}

/** The RateLimit header names of a reply, sorted. */
function names(reply: Reply): string[] {
  return rateLimitHeaderNames(reply.headers).sort();
}

const LEGACY = ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset'];

/** The time `seventh` runs at, on the limiter's clock: far from this machine's own. */
const START = Date.UTC(2031, 4, 6, 7, 8, 9, 100);

conformance((driver, storeName) => {
  it('sends the draft-11 fields by default, exactly', async () => {
    const reply = await seventh(driver, storeName);
    expect(names(reply)).toEqual(['ratelimit', 'ratelimit-policy']);
    expect(pick(reply, ['ratelimit-policy', 'ratelimit'])).toEqual({
      'ratelimit-policy': '"free-minute";q=10;w=60',
      ratelimit: '"free-minute";r=3;t=42',
    });
  });

  it('sends the draft-7 dictionary, exactly', async () => {
    const reply = await seventh(driver, storeName, { headers: 'draft-7' });
    expect(names(reply)).toEqual(['ratelimit', 'ratelimit-policy']);
    expect(pick(reply, ['ratelimit-policy', 'ratelimit'])).toEqual({
      'ratelimit-policy': '10;w=60',
      ratelimit: 'limit=10, remaining=3, reset=42',
    });
    const parsed = parseDictionary(reply.headers.get('ratelimit') ?? '');
    expect([...parsed].map(([key, [value]]) => [key, value])).toEqual([
      ['limit', 10],
      ['remaining', 3],
      ['reset', 42],
    ]);
  });

  it('sends the separate draft-6 fields, exactly', async () => {
    const reply = await seventh(driver, storeName, { headers: 'draft-6' });
    const fields = [
      'ratelimit-limit',
      'ratelimit-policy',
      'ratelimit-remaining',
      'ratelimit-reset',
    ];
    expect(names(reply)).toEqual(fields);
    expect(pick(reply, fields)).toEqual({
      'ratelimit-limit': '10',
      'ratelimit-policy': '10;w=60',
      'ratelimit-remaining': '3',
      'ratelimit-reset': '42',
    });
  });

  it("sends the legacy X-RateLimit fields with a Unix reset time on the limiter's clock", async () => {
    const reply = await seventh(driver, storeName, { headers: 'legacy' });
    expect(names(reply)).toEqual(LEGACY);
    expect(pick(reply, LEGACY)).toEqual({
      'x-ratelimit-limit': '10',
      'x-ratelimit-remaining': '3',
      'x-ratelimit-reset': String(Math.ceil((START + 42_000) / 1000)),
    });
  });

  it('combines a draft with the legacy fields', async () => {
    const reply = await seventh(driver, storeName, { headers: ['draft-11', 'legacy'] });
    expect(names(reply)).toEqual(['ratelimit', 'ratelimit-policy', ...LEGACY]);
    expect(pick(reply, ['ratelimit-policy', 'ratelimit', ...LEGACY])).toEqual({
      'ratelimit-policy': '"free-minute";q=10;w=60',
      ratelimit: '"free-minute";r=3;t=42',
      'x-ratelimit-limit': '10',
      'x-ratelimit-remaining': '3',
      'x-ratelimit-reset': String(Math.ceil((START + 42_000) / 1000)),
    });
  });

  it('sends no RateLimit fields with headers false, yet still Retry-After on a 429', async () => {
    const app = await startApp(driver, {
      options: { ...useStore(storeName).options, limit: 1, window: '1m', headers: false },
    });
    const [admitted, refused] = await getMany(app, 2);
    expect(admitted?.status).toBe(200);
    expect(rateLimitHeaderNames(admitted?.headers ?? new Headers())).toEqual([]);
    expect(refused?.status).toBe(429);
    expect(rateLimitHeaderNames(refused?.headers ?? new Headers())).toEqual([]);
    expect(refused?.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
  });

  it('reports an exhausted policy on the 429 itself', async () => {
    const clock = manualClock();
    const app = await startApp(driver, {
      options: { ...useStore(storeName, { clock: clock.now }).options, policies: FREE },
    });
    const replies = await getMany(app, 11);
    const refused = replies[10] as Reply;
    expect(refused.status).toBe(429);
    expect(pick(refused, ['ratelimit-policy', 'ratelimit', 'retry-after'])).toEqual({
      'ratelimit-policy': '"free-minute";q=10;w=60',
      ratelimit: '"free-minute";r=0;t=60',
      'retry-after': '6',
    });
  });

  it('parses as structured-field lists of strings with integer parameters', async () => {
    const reply = await seventh(driver, storeName);
    expect(parseList(reply.headers.get('ratelimit-policy') ?? '')).toEqual([
      [
        'free-minute',
        new Map([
          ['q', 10],
          ['w', 60],
        ]),
      ],
    ]);
    expect(parseList(reply.headers.get('ratelimit') ?? '')).toEqual([
      [
        'free-minute',
        new Map([
          ['r', 3],
          ['t', 42],
        ]),
      ],
    ]);
  });

  it('lists every policy and reports the most restrictive, in parseable form', async () => {
    const clock = manualClock();
    const app = await startApp(driver, {
      options: {
        ...useStore(storeName, { clock: clock.now }).options,
        tiers: {
          'Pro.Plan_2': [
            { name: 'pro-minute', limit: 100, window: '1m' },
            { name: 'pro.burst_1', limit: 20, window: '1s' },
          ],
          TIGHT: [
            { limit: 20, window: '1s' },
            { limit: 5, window: '1m', algorithm: 'gcra' },
          ],
        },
        identify: (req) => ({ key: 'tenant', tier: String(req.headers['x-tier']) }),
      },
    });
    const pro = await app.get('/', { 'x-tier': 'Pro.Plan_2' });
    const policy = pro.headers.get('ratelimit-policy') ?? '';
    expect(policy).toBe('"pro-minute";q=100;w=60, "pro.burst_1";q=20;w=1');
    expect(pro.headers.get('ratelimit')).toBe('"pro.burst_1";r=19;t=1');
    expect(parseList(policy)).toEqual([
      [
        'pro-minute',
        new Map([
          ['q', 100],
          ['w', 60],
        ]),
      ],
      [
        'pro.burst_1',
        new Map([
          ['q', 20],
          ['w', 1],
        ]),
      ],
    ]);
    expect(parseList(pro.headers.get('ratelimit') ?? '')).toEqual([
      [
        'pro.burst_1',
        new Map([
          ['r', 19],
          ['t', 1],
        ]),
      ],
    ]);
    // Default names derive from the tier; the minute policy is the tighter one here.
    const tight = await app.get('/', { 'x-tier': 'TIGHT' });
    expect(tight.headers.get('ratelimit-policy')).toBe(
      '"tight-20-per-1s";q=20;w=1, "tight-5-per-1m";q=5;w=60',
    );
    expect(tight.headers.get('ratelimit')).toBe('"tight-5-per-1m";r=4;t=12');
    expect(parseList(tight.headers.get('ratelimit') ?? '')).toEqual([
      [
        'tight-5-per-1m',
        new Map([
          ['r', 4],
          ['t', 12],
        ]),
      ],
    ]);
  });
});
