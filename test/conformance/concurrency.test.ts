// Concurrency policies through every adapter: a request holds its slot while its handler runs,
// and gives it back once its response is done, whether it answered, threw, or its client left.
import { expect, it } from 'vitest';
import { waitFor } from '../harness/wait-for.ts';
import { conformance, startApp, useStore } from './adapters.ts';

conformance((driver, storeName) => {
  it('lets exactly `concurrency` requests of one identity in at once, and leaks no slot', async () => {
    let running = 0;
    let most = 0;
    let reached = 0;
    let refusedSoFar = 0;
    // The admitted hold their slots until every request is decided, however slow the machine.
    let open: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const app = await startApp(driver, {
      options: { ...useStore(storeName).options, concurrency: 5 },
      routes: [
        {
          path: '/slow',
          async work() {
            reached++;
            most = Math.max(most, ++running);
            await gate;
            running--;
          },
        },
      ],
    });
    const sent = Array.from({ length: 40 }, () =>
      app.get('/slow').then((reply) => {
        if (reply.status === 429) refusedSoFar++;
        return reply;
      }),
    );
    await waitFor(() => reached + refusedSoFar === 40, 10_000, 'all 40 requests decided');
    open();
    const replies = await Promise.all(sent);
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
    // A real socket: the client that goes away is the point.
    const url = await app.listen();
    const leaving = new AbortController();
    const left = fetch(`${url}/hangs`, { signal: leaving.signal }).catch(() => 'aborted');
    await waitFor(() => started, 5_000, 'the handler to start');
    // Its slot is held while the handler runs.
    expect((await app.get('/')).status).toBe(429);
    leaving.abort();
    expect(await left).toBe('aborted');
    // The handler is still running, yet the slot is back once the connection closed.
    await waitFor(async () => (await app.get('/')).status === 200, 5_000, 'the slot to come back');
    finish();
  });

  it("sheds load past the fleet's normal share, and keeps the reserve for critical requests", async () => {
    let running = 0;
    let open: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const app = await startApp(driver, {
      options: {
        ...useStore(storeName).options,
        limit: 1000,
        window: '1m',
        shed: {
          concurrency: 10,
          reserve: 0.2,
          critical: (req) => req.headers['x-critical'] === 'yes',
        },
      },
      routes: [
        {
          path: '/busy',
          async work() {
            running++;
            await gate;
            running--;
          },
        },
      ],
    });
    let answered = 0;
    const held = Array.from({ length: 30 }, () =>
      app.get('/busy').then((reply) => {
        answered++;
        return reply;
      }),
    );
    // All 30 decided: 8 in the handler, 22 answered.
    await waitFor(() => running === 8 && answered === 22, 10_000, '30 requests decided');
    const critical = Array.from({ length: 3 }, () => app.get('/busy', { 'x-critical': 'yes' }));
    await waitFor(() => running === 10, 10_000, 'the reserve to fill');
    // Full: one more critical request is shed too.
    const over = await app.get('/busy', { 'x-critical': 'yes' });
    open();
    const replies = await Promise.all(held);
    expect(replies.filter((r) => r.status === 200)).toHaveLength(8);
    const shed = replies.filter((r) => r.status === 503);
    expect(shed).toHaveLength(22);
    expect(shed[0]?.body).toMatchObject({ status: 503, reason: 'shed' });
    expect(Number(shed[0]?.headers.get('retry-after'))).toBeGreaterThan(0);
    const reserve = await Promise.all(critical);
    expect(reserve.map((r) => r.status).sort()).toEqual([200, 200, 503]);
    expect(over.status).toBe(503);
    // Every slot came back with its response.
    const after = await Promise.all(Array.from({ length: 8 }, () => app.get('/busy')));
    expect(after.every((r) => r.status === 200)).toBe(true);
  });
});
