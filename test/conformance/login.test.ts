// Login protection in every adapter: failures count, successes are given back, and a burst of guesses reaches the handler exactly `limit` times.
import { expect, it } from 'vitest';
import { useStore } from './adapters.ts';
import {
  eachAdapter,
  type OutcomeApp,
  remainingOf,
  startOutcomeApp,
  statuses,
} from './outcome-apps.ts';

const LOGIN = { limit: 5, window: '1h', skipSuccessfulRequests: true } as const;
const identify = () => ({ key: 'login:alice' });

/** Counts each status among `seen`. */
function tally(seen: readonly number[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const status of seen) counts[status] = (counts[status] ?? 0) + 1;
  return counts;
}

/** `count` failed logins at once: the handler answers each it sees with 401. */
async function guesses(app: OutcomeApp, count: number): Promise<number[]> {
  const replies = await Promise.all(
    Array.from({ length: count }, () => app.get('/', { 'x-status': '401' })),
  );
  return replies.map((reply) => reply.status);
}

eachAdapter((driver, storeName) => {
  it('lets exactly 5 of 200 concurrent failed logins reach the handler', async () => {
    const store = useStore(storeName);
    const app = await startOutcomeApp(driver, {
      options: { ...store.options, ...LOGIN, identify },
    });
    expect(tally(await guesses(app, 200))).toEqual({ 401: 5, 429: 195 });
    expect(app.room.handled).toBe(5);
  });

  it('with ban, answers the guesses past 5 refusals with 403', async () => {
    const store = useStore(storeName);
    const app = await startOutcomeApp(driver, {
      options: { ...store.options, ...LOGIN, identify, ban: 5 },
    });
    expect(tally(await guesses(app, 200))).toEqual({ 401: 5, 429: 5, 403: 190 });
    expect(app.room.handled).toBe(5);
  });

  it('never locks out a user whose logins succeed, and counts only the failures', async () => {
    const store = useStore(storeName);
    const remaining = remainingOf(store, { limit: LOGIN.limit, window: LOGIN.window });
    const app = await startOutcomeApp(driver, {
      options: { ...store.options, ...LOGIN, identify },
    });
    for (let round = 0; round < 4; round++) {
      expect(await statuses(app, 1, '/', { 'x-status': '401' })).toEqual([401]);
      expect(await statuses(app, 5)).toEqual(Array(5).fill(200));
    }
    expect(await remaining('login:alice')).toBe(1);
    expect(await statuses(app, 2, '/', { 'x-status': '401' })).toEqual([401, 429]);
  });
});
