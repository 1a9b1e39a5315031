// Quota leases over HTTP: a hot client spends leased units without a Redis call each, and still
// gets exactly the limit, with a RateLimit header that counts down by one.
import { expect, it } from 'vitest';
import { conformance, getMany, startApp, useStore } from './adapters.ts';

conformance((driver, storeName) => {
  it('admits exactly the limit with quota leases on, its remaining counting down by one', async () => {
    const { options } = useStore(storeName);
    // Decisions made without the store: spent from a lease.
    let local = 0;
    const observe = {
      decision({ storeMs }: { storeMs: number | undefined }) {
        if (storeMs === undefined) local++;
      },
    };
    const app = await startApp(driver, {
      options: { ...options, limit: 60, window: '1h', quotaLeases: { hotAt: 4 }, observe },
    });
    const replies = await getMany(app, 70);
    expect(replies.map((r) => r.status)).toEqual([...Array(60).fill(200), ...Array(10).fill(429)]);
    const remaining = replies.map((r) =>
      Number(/;r=(\d+)/.exec(r.headers.get('ratelimit') ?? '')?.[1]),
    );
    expect(remaining).toEqual([
      ...Array.from({ length: 60 }, (_, i) => 59 - i),
      ...Array(10).fill(0),
    ]);
    // On Redis, most of them; with the memory store, where every decision is local already and
    // takes no lease, none.
    if (storeName === 'redis') expect(local).toBeGreaterThan(30);
    else expect(local).toBe(0);
  });
});
