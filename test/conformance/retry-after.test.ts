// Retry-After is honest: whole seconds, rounded up, at least 1; waiting it out gets a request in.
import { setTimeout as sleep } from 'node:timers/promises';
import { expect, it } from 'vitest';
import {
  ALGORITHMS,
  type HttpLimiterOptions,
  type RequestLike,
} from '../../packages/core/src/index.ts';
import { type Clock, manualClock } from '../../packages/core/test/stores.ts';
import type { AdapterDriver } from '../adapters/driver.ts';
import {
  type App,
  conformance,
  type Reply,
  type StoreName,
  startApp,
  useStore,
} from './adapters.ts';

// Not on a window boundary, so that fixed windows end at an odd millisecond and rounding shows.
const START = Date.UTC(2026, 0, 1) + 400;

/** Sends requests until one is refused, and returns that refusal. */
async function untilRefused(app: App, headers: Record<string, string> = {}): Promise<Reply> {
  for (let i = 0; i < 100; i++) {
    const reply = await app.get('/', headers);
    if (reply.status !== 200) return reply;
  }
  throw new Error('no request was refused');
}

/** The Retry-After of a 429, checked to be whole seconds of at least 1. */
function retryAfter(reply: Reply): number {
  expect(reply.status).toBe(429);
  const value = reply.headers.get('retry-after') ?? '';
  expect(value).toMatch(/^[1-9]\d*$/);
  return Number(value);
}

/**
 * Waits out a refusal on the clock: one second short it is still refused (the header is rounded
 * up, not padded), and after exactly Retry-After seconds the same request is admitted.
 */
async function expectHonest(
  app: App,
  clock: Clock,
  refused: Reply,
  headers: Record<string, string> = {},
): Promise<void> {
  const seconds = retryAfter(refused);
  if (seconds > 1) {
    clock.advance((seconds - 1) * 1000);
    expect((await app.get('/', headers)).status).toBe(429);
    clock.advance(1000);
  } else {
    clock.advance(seconds * 1000);
  }
  expect((await app.get('/', headers)).status).toBe(200);
}

async function appWith(
  driver: AdapterDriver,
  storeName: StoreName,
  clock: Clock,
  options: Partial<HttpLimiterOptions>,
): Promise<App> {
  return startApp(driver, {
    options: { ...useStore(storeName, { clock: clock.now }).options, ...options },
  });
}

conformance((driver, storeName) => {
  it.each(ALGORITHMS)('tells the truth about when %s admits again', async (algorithm) => {
    const clock = manualClock(START);
    const app = await appWith(driver, storeName, clock, { limit: 3, window: '10s', algorithm });
    const refused = await untilRefused(app);
    await expectHonest(app, clock, refused);
    // And again from the middle of a window, after the state has moved on.
    clock.advance(3_700);
    await expectHonest(app, clock, await untilRefused(app));
  });

  it('rounds a sub-second wait up to 1 second', async () => {
    const clock = manualClock(START);
    const app = await appWith(driver, storeName, clock, { limit: 20, window: '1s' });
    const refused = await untilRefused(app);
    // One token of 20 per second refills in 50 ms.
    expect(refused.headers.get('retry-after')).toBe('1');
    await expectHonest(app, clock, refused);
  });

  it('covers the whole cost of the refused request', async () => {
    const clock = manualClock(START);
    const cost = (req: RequestLike) => Number(req.headers['x-cost'] ?? 1);
    const app = await appWith(driver, storeName, clock, { limit: 3, window: '10s', cost });
    expect((await app.get('/', { 'x-cost': '2' })).status).toBe(200);
    const refused = await app.get('/', { 'x-cost': '2' });
    // One token left, two needed: one more refills in 3 334 ms.
    expect(refused.headers.get('retry-after')).toBe('4');
    await expectHonest(app, clock, refused, { 'x-cost': '2' });
  });

  it('waits for the slowest of several refusing policies', async () => {
    const clock = manualClock(START);
    const app = await appWith(driver, storeName, clock, {
      policies: [
        { limit: 5, window: '1m' },
        { limit: 2, window: '1s' },
      ],
    });
    const burst = await untilRefused(app);
    expect(burst.headers.get('retry-after')).toBe('1');
    await expectHonest(app, clock, burst);
    clock.advance(1000);
    // Two more fill the minute's five: the minute policy now decides, 12 s per token.
    const minute = await untilRefused(app);
    expect(minute.headers.get('ratelimit')).toMatch(/^"5-per-1m";r=0;/);
    expect(retryAfter(minute)).toBeGreaterThan(1);
    await expectHonest(app, clock, minute);
  });

  it('admits a request really sent Retry-After seconds later', async () => {
    const app = await startApp(driver, {
      options: { ...useStore(storeName).options, limit: 1, window: '1s' },
    });
    expect((await app.get()).status).toBe(200);
    const refused = await app.get();
    const seconds = retryAfter(refused);
    expect(seconds).toBe(1);
    await sleep(seconds * 1000);
    expect((await app.get()).status).toBe(200);
  });
});
