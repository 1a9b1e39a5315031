// FUNCTION FLUSH and SCRIPT FLUSH under HTTP load: every algorithm falls back to EVALSHA and EVAL,
// and loads its library again, without an error or a double count.
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { expect, it } from 'vitest';
import { ALGORITHMS, type HttpLimiterOptions } from '../../packages/core/src/index.ts';
import { commandCalls } from '../harness/connection-checks.ts';
import { DRIVERS, faultApp, ownRedis } from './apps.ts';
import { identities, now, startLoad } from './load.ts';

const LIMIT = 100;
const USERS = identities('flush', 10);
const PER_USER = 150;

// Day-long windows: no refill or window change blurs the exact counts.
const CASES: Array<[string, Partial<HttpLimiterOptions>]> = [
  ...ALGORITHMS.map((algorithm): [string, Partial<HttpLimiterOptions>] => [
    algorithm,
    { limit: LIMIT, window: '1d', algorithm },
  ]),
  [
    'two policies at once',
    {
      policies: [
        { limit: LIMIT, window: '1d' },
        { limit: 2 * LIMIT, window: '1d', algorithm: 'sliding-window-log' },
      ],
    },
  ],
];

/**
 * How many EVALs Redis ran, each a fallback after NOSCRIPT, and how many times the function
 * library was loaded, each after FCALL found it missing (or at the first call).
 */
async function fallbacks(admin: Redis): Promise<{ evals: number; loads: number }> {
  return {
    evals: await commandCalls([admin], 'eval'),
    loads: await commandCalls([admin], 'function\\|load'),
  };
}

// The adapters take the cases in turn: each runs two of them.
for (const [i, [name, options]] of CASES.entries()) {
  const driver = DRIVERS[i % DRIVERS.length] as (typeof DRIVERS)[number];
  it(`admits exactly the limit with ${name} on ${driver.name} while functions and scripts are flushed`, async () => {
    const server = await ownRedis();
    // The default 50 ms deadline: a Redis that answers NOSCRIPT is answering, so nothing degrades.
    const app = await faultApp(driver, server, options);
    const admin = new Redis(server.url);
    const before = await fallbacks(admin);
    // 20 in flight, 1500 requests over 10 identities, then the load ends by itself.
    const load = startLoad(app.url, {
      concurrency: 20,
      maxMs: 20_000,
      maxRequests: USERS.length * PER_USER,
      users: USERS,
    });
    let running = true;
    const flushes: number[] = [];
    const flusher = (async () => {
      while (running) {
        await admin.call('FUNCTION', 'FLUSH');
        await admin.script('FLUSH');
        flushes.push(now());
        await sleep(20);
      }
    })();
    const samples = await load.done;
    running = false;
    await flusher;
    const after = await fallbacks(admin);
    admin.disconnect();

    expect(app.failures).toEqual([]);
    expect(samples.filter((s) => s.degraded !== undefined)).toEqual([]);
    for (const user of USERS) {
      const mine = samples.filter((s) => s.user === user);
      const admitted = mine.filter((s) => s.status === 200).length;
      const refused = mine.filter((s) => s.status === 429).length;
      expect({ user, admitted, refused }).toEqual({
        user,
        admitted: LIMIT,
        refused: PER_USER - LIMIT,
      });
    }
    // The flushes fell while requests were still being admitted, and calls did find the library
    // missing and meet NOSCRIPT.
    const admittedAt = samples.filter((s) => s.status === 200).map((s) => s.sentAt);
    const lastAdmitted = Math.max(...admittedAt);
    expect(flushes.filter((at) => at < lastAdmitted).length).toBeGreaterThanOrEqual(5);
    expect(after.loads - before.loads).toBeGreaterThanOrEqual(5);
    expect(after.evals - before.evals).toBeGreaterThanOrEqual(5);
  });
}
