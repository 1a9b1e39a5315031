// `shed`: the fleet's requests in flight, and the reserve kept for critical ones, from the memory store.
import { describe, expect, it } from 'vitest';
import { createHttpLimiter, type HttpLimiterOptions } from '../../src/index.ts';

const client = (headers: Record<string, string> = {}) => ({ headers, ip: '203.0.113.9' });
let tests = 0;
const limiterWith = (options: Partial<HttpLimiterOptions>) =>
  createHttpLimiter({ prefix: `shed-${++tests}`, limit: 100, window: '1m', ...options });

describe('shed', () => {
  it('refuses with 503 past the normal share, and keeps the reserve for critical requests', async () => {
    const limiter = limiterWith({
      shed: {
        concurrency: 5,
        reserve: 0.4,
        critical: async (req) => req.headers['x-critical'] === 'yes',
      },
    });
    const normal = [];
    for (let i = 0; i < 4; i++) normal.push(await limiter.check(client()));
    expect(normal.map((v) => v.action)).toEqual(['next', 'next', 'next', 'respond']);
    expect(normal[3]).toMatchObject({ status: 503, reason: 'shed', body: { reason: 'shed' } });
    const critical = [];
    for (let i = 0; i < 3; i++) critical.push(await limiter.check(client({ 'x-critical': 'yes' })));
    expect(critical.map((v) => v.action)).toEqual(['next', 'next', 'respond']);
    // The identity's own budget paid only for the requests let in: 5 of the 7.
    expect(critical[1]?.decision?.remaining).toBe(100 - 5);
    await limiter.close();
  });

  it("gives the fleet slot back at once when the identity's own policies refuse", async () => {
    const limiter = limiterWith({ limit: 1, shed: { concurrency: 2, reserve: 0 } });
    expect((await limiter.check(client())).action).toBe('next');
    const refused = await limiter.check(client());
    expect(refused).toMatchObject({ action: 'respond', status: 429 });
    // One fleet slot held (the first request's), one free: another identity gets it.
    expect((await limiter.check({ headers: {}, ip: '198.51.100.1' })).action).toBe('next');
    await limiter.close();
  });

  it('refuses bad options with a TypeError naming the field', () => {
    const bad = (shed: unknown) => () => limiterWith({ shed: shed as never });
    expect(bad({ concurrency: 0 })).toThrow(/shed\.concurrency/);
    expect(bad({ concurrency: 10, reserve: 1 })).toThrow(/shed\.reserve/);
    expect(bad({ concurrency: 1, reserve: 0.5 })).toThrow(/shed\.reserve/);
    expect(bad({ concurrency: 10, critical: 'yes' })).toThrow(/shed\.critical/);
    expect(bad({ concurrency: 10, lease: 'soon' })).toThrow(/shed\.lease/);
    expect(bad({ concurrency: 10, reserv: 0.1 })).toThrow(/reserv/);
    expect(bad({ concurrency: 0 })).toThrow(TypeError);
    expect(bad({ concurrency: 10_001 })).toThrow(/shed\.concurrency/);
    // 10 less 90% is 1 slot, however floating point rounds it.
    expect(() => limiterWith({ shed: { concurrency: 10, reserve: 0.9 } })).not.toThrow();
  });
});
