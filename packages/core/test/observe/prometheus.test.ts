// @sentinel/core/prometheus: the metrics a scrape shows after real decisions and a real outage.
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { holdReplies } from '../../../../test/harness/late-reply.ts';
import {
  limiterOn,
  owned,
  ownServer,
  RECOMMENDED,
  readyClient,
  waitFor,
} from '../../../../test/harness/own-redis.ts';
import { createLimiter, MemoryStore } from '../../src/index.ts';
import { prometheusMetrics } from '../../src/observe/prometheus.ts';

/** The value of one sample line of the scrape, or undefined if absent. */
async function sample(registry: Registry, line: string): Promise<number | undefined> {
  const text = await registry.metrics();
  const found = text.split('\n').find((l) => l.startsWith(`${line} `));
  return found === undefined ? undefined : Number(found.slice(line.length + 1));
}

describe('prometheusMetrics', () => {
  it('gauges the concurrency slots held, and counts those released after their lease ended', async () => {
    const registry = new Registry();
    let now = Date.UTC(2026, 0, 1);
    const limiter = owned(
      createLimiter({
        store: new MemoryStore({ clock: () => now }),
        tiers: {
          PRO: [
            { name: 'rate', limit: 100, window: '1m' },
            { name: 'slots', concurrency: 3, lease: '10s' },
          ],
        },
        observe: prometheusMetrics(registry),
      }),
    );
    const held = 'sentinel_in_flight{tier="PRO",policy="slots"}';
    const lapsed = 'sentinel_leases_lapsed_total{tier="PRO",policy="slots"}';
    const a = await limiter.consume('t', { tier: 'PRO' });
    const b = await limiter.consume('t', { tier: 'PRO', cost: 2 });
    await limiter.consume('t', { tier: 'PRO' });
    expect(await sample(registry, held)).toBe(3);
    expect(await limiter.release(a)).toBe(true);
    expect(await sample(registry, held)).toBe(2);
    now += 11_000;
    // Past its lease: the slots were free already, and the release says so.
    expect(await limiter.release(b)).toBe(false);
    expect(await sample(registry, held)).toBe(0);
    expect(await sample(registry, lapsed)).toBe(2);
  });

  it('counts decisions by tier, policy and outcome, times the store, and counts identities near their limit', async () => {
    const registry = new Registry();
    const limiter = owned(
      createLimiter({
        store: new MemoryStore(),
        tiers: { FREE: { name: 'free', limit: 10, window: '1m' } },
        observe: prometheusMetrics(registry),
      }),
    );
    for (let i = 0; i < 12; i++) await limiter.consume('heavy', { tier: 'FREE' });
    await limiter.consume('light', { tier: 'FREE' });
    await limiter.peek('light', { tier: 'FREE' });

    expect(
      await sample(
        registry,
        'sentinel_decisions_total{tier="FREE",policy="free",outcome="allowed"}',
      ),
    ).toBe(12);
    expect(
      await sample(
        registry,
        'sentinel_decisions_total{tier="FREE",policy="free",outcome="limited"}',
      ),
    ).toBe(2);
    expect(await sample(registry, 'sentinel_store_duration_seconds_count')).toBe(14);
    expect(await sample(registry, 'sentinel_store_duration_seconds_bucket{le="+Inf"}')).toBe(14);
    // A decision in memory takes well under 250 ms: every one falls in the largest bound.
    expect(await sample(registry, 'sentinel_store_duration_seconds_bucket{le="0.25"}')).toBe(14);
    expect(await registry.metrics()).toContain('# TYPE sentinel_store_duration_seconds histogram');
    // `heavy` used all of its 10; `light` one of them.
    expect(await sample(registry, 'sentinel_near_limit_identities{tier="FREE"}')).toBe(1);
    const text = await registry.metrics();
    expect(text).not.toMatch(/\bheavy\b/);
    // As a word: the metric `in_flight` holds the letters.
    expect(text).not.toMatch(/\blight\b/);
  });

  it('gives limiters that share a registry one set of metrics', async () => {
    const registry = new Registry();
    const first = prometheusMetrics(registry);
    expect(prometheusMetrics(registry)).toBe(first);
    const limiters = [1, 2].map(() =>
      owned(createLimiter({ store: new MemoryStore(), limit: 5, window: '1m', observe: first })),
    );
    for (const limiter of limiters) await limiter.consume('user');
    expect(
      await sample(
        registry,
        'sentinel_decisions_total{tier="",policy="5-per-1m",outcome="allowed"}',
      ),
    ).toBe(2);
  });

  it('shows a Redis outage as store errors, a store down and an open breaker, then recovery', async () => {
    const registry = new Registry();
    const server = await ownServer();
    const client = await readyClient(server, RECOMMENDED);
    const { limiter, warmUp } = limiterOn(client, {
      observe: prometheusMetrics(registry),
      breaker: { failures: 3, cooldownMs: 100 },
    });
    await warmUp();
    await server.stop();
    await waitFor(() => client.status !== 'ready');
    for (let i = 0; i < 10; i++) await limiter.consume('user');

    expect(
      await sample(registry, 'sentinel_store_errors_total{code="STORE_UNAVAILABLE",server=""}'),
    ).toBe(3);
    expect(await sample(registry, 'sentinel_store_up{server=""}')).toBe(0);
    expect(await sample(registry, 'sentinel_breaker_open{server=""}')).toBe(1);
    expect(
      await sample(
        registry,
        'sentinel_decisions_total{tier="",policy="10-per-1d",outcome="degraded"}',
      ),
    ).toBe(10);

    await server.restart();
    await waitFor(async () => (await limiter.consume('user')).degraded === undefined, 10_000);
    expect(await sample(registry, 'sentinel_store_up{server=""}')).toBe(1);
    expect(await sample(registry, 'sentinel_breaker_open{server=""}')).toBe(0);
  });

  it('counts consumes admitted after the store gave up on them, given back or left taken', async () => {
    const registry = new Registry();
    const server = await ownServer();
    const client = await readyClient(server, RECOMMENDED);
    const { limiter, warmUp, errors } = limiterOn(client, {
      tiers: { FREE: { limit: 10, window: '1h' } },
      limit: undefined,
      window: undefined,
      observe: prometheusMetrics(registry),
      breaker: false,
    });
    await warmUp();
    const line = (outcome: string) =>
      `sentinel_late_refunds_total{tier="FREE",outcome="${outcome}"}`;
    expect(await sample(registry, line('refunded'))).toBeUndefined();
    // Redis runs each consume in time, and its reply comes 200 ms later: past the deadline.
    let held = holdReplies(client, 200);
    expect((await limiter.consume('user')).degraded).toBe('allow');
    await held;
    await waitFor(async () => (await sample(registry, line('refunded'))) === 1);
    // Then a consume whose refund is answered late too: it failed, as far as anyone knows.
    held = holdReplies(client, 200, 2);
    expect((await limiter.consume('user')).degraded).toBe('allow');
    await held;
    await waitFor(async () => (await sample(registry, line('failed'))) === 1);
    expect(await sample(registry, line('refunded'))).toBe(1);
    expect(errors.map((error) => error.code)).toEqual(Array(3).fill('STORE_TIMEOUT'));
  });

  it.each([
    [[{}], /`registry` must be a prom-client Registry/],
    [[new Registry(), { prefix: 'bad-name' }], /`prefix` must be a valid start/],
    [[new Registry(), { nearLimit: 2 }], /`nearLimit` must be a number above 0/],
    [
      [new Registry(), { bucket: [1] }],
      /`options\.bucket` is not an option: did you mean `options\.buckets`/,
    ],
  ])('refuses bad arguments with a TypeError naming them (%#)', (args, message) => {
    expect(() => (prometheusMetrics as (...a: unknown[]) => unknown)(...args)).toThrow(
      expect.objectContaining({ name: 'TypeError', message: expect.stringMatching(message) }),
    );
  });
});
