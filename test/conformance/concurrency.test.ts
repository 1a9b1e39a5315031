// Concurrency policies through every adapter: a request holds its slot while its handler runs,
// and gives it back once its response is done, whether it answered, threw, or its client left.
import { setTimeout as sleep } from 'node:timers/promises';
import { expect, it } from 'vitest';
import { waitFor } from '../harness/wait-for.ts';
import { conformance, startApp, useStore } from './adapters.ts';

conformance((driver, storeName) => {
  it('lets exactly `concurrency` requests of one identity in at once, and leaks no slot', async () => {
    let running = 0;
    let most = 0;
    let reached = 0;
    const app = await startApp(driver, {
      options: { ...useStore(storeName).options, concurrency: 5 },
      routes: [
        {
          path: '/slow',
          async work() {
            reached++;
            most = Math.max(most, ++running);
            await sleep(300);
            running--;
          },
        },
      ],
    });
    const replies = await Promise.all(Array.from({ length: 40 }, () => app.get('/slow')));
    expect(replies.filter((r) => r.status === 200)).toHaveLength(5);
    const refused = replies.filter((r) => r.status === 429);
    expect(refused).toHaveLength(35);
    expect([reached, most]).toEqual([5, 5]);
    // The refusal says why, in the draft's own unit, with no reset time nobody knows.
    const refusal = refused[0];
    expect(refusal?.body).toMatchObject({ status: 429, reason: 'concurrency' });
    expect(refusal?.headers.get('ratelimit-policy')).toBe(
      '"5-in-flight";q=5;qu="concurrent-requests"',
    );
    expect(refusal?.headers.get('ratelimit')).toBe('"5-in-flight";r=0');
    // At the latest when the leases end: a minute, by default.
    expect(Number(refusal?.headers.get('retry-after'))).toBeGreaterThan(50);
    // Every slot came back: one after another, each is admitted.
    for (let i = 0; i < 10; i++) expect((await app.get('/slow')).status).toBe(200);
  });

  it('gives the slot back when the handler throws', async () => {
    const app = await startApp(driver, {
      options: { ...useStore(storeName).options, concurrency: 1 },
      routes: [{ path: '/fails', work: () => Promise.reject(new Error('handler failed')) }],
    });
    expect((await app.get('/fails')).status).toBe(500);
    expect((await app.get('/fails')).status).toBe(500);
    expect((await app.get('/')).status).toBe(200);
  });

  it('gives the slot back when the client goes away mid-request', async () => {
    let started = false;
    let finish: () => void = () => {};
    const app = await startApp(driver, {
      options: { ...useStore(storeName).options, concurrency: 1 },
      routes: [
        {
          path: '/hangs',
          work: () =>
            new Promise<void>((resolve) => {
              started = true;
              finish = resolve;
            }),
        },
      ],
    });
    const leaving = new AbortController();
    const left = fetch(`${app.url}/hangs`, { signal: leaving.signal }).catch(() => 'aborted');
    await waitFor(() => started, 5_000, 'the handler to start');
    // Its slot is held while the handler runs.
    expect((await app.get('/')).status).toBe(429);
    leaving.abort();
    expect(await left).toBe('aborted');
    // The handler is still running, yet the slot is back once the connection closed.
    await waitFor(async () => (await app.get('/')).status === 200, 5_000, 'the slot to come back');
    finish();
  });
});
