// An identity counted within another: both budgets or neither, and outcomes give back to both.
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import type { NodeResponse } from '../../src/http/refund-by-outcome.ts';
import { createHttpLimiter, type HttpLimiterOptions, MemoryStore } from '../../src/index.ts';

const req = (user: string) => ({ headers: { 'x-user': user }, ip: '203.0.113.9' });

/** Users counted within one organisation: 3 each, and 3 for the organisation too. */
function limiterWith(options: Partial<HttpLimiterOptions> = {}) {
  const store = new MemoryStore();
  const errors: Error[] = [];
  const http = createHttpLimiter({
    store,
    limit: 3,
    window: '1h',
    identify: (r) => ({ key: `user:${String(r.headers['x-user'])}`, within: 'org:acme' }),
    onError: (error) => errors.push(error),
    ...options,
  });
  const peek = async (key: string) => (await http.limiter.peek(key)).remaining;
  return {
    http: Object.assign(http, { store }),
    errors,
    peek,
    close: () => http.close().then(() => store.close()),
  };
}

/** A Node response that finishes when told, as the adapters' raw responses do. */
function response(statusCode: number): NodeResponse & { finish(): void } {
  const emitter = new EventEmitter();
  return Object.assign(emitter, {
    statusCode,
    writableFinished: false,
    finish() {
      this.writableFinished = true;
      emitter.emit('finish');
      emitter.emit('close');
    },
  }) as unknown as NodeResponse & { finish(): void };
}

describe('an identity within another', () => {
  it('is admitted only while both budgets admit, and each admission takes from both', async () => {
    const { http, peek, close } = limiterWith();
    const statuses = [];
    for (const user of ['a', 'a', 'b', 'b']) {
      const verdict = await http.check(req(user));
      statuses.push(verdict.action === 'respond' ? verdict.status : 200);
    }
    // The organisation's 3 run out before either user's.
    expect(statuses).toEqual([200, 200, 200, 429]);
    expect([await peek('user:a'), await peek('user:b'), await peek('org:acme')]).toEqual([1, 2, 0]);
    await close();
  });

  it('holds slots of both budgets under a concurrency policy, and gives both back', async () => {
    const { http, close } = limiterWith({ limit: undefined, window: undefined, concurrency: 2 });
    const first = await http.check(req('a'));
    const second = await http.check(req('b'));
    expect([first.action, second.action]).toEqual(['next', 'next']);
    // The organisation's 2 slots are held: a third user is refused, and gives back what it took.
    const third = await http.check(req('c'));
    expect(third).toMatchObject({ action: 'respond', status: 429 });
    const res = response(200);
    http.countByOutcome(first, req('a'), undefined, res);
    res.finish();
    // Both of a's slots came back: the organisation's and its own.
    await expect.poll(async () => (await http.check(req('c'))).action).toBe('next');
    expect((await http.check(req('a'))).action).toBe('respond');
    await close();
  });

  it('releases at once the slots of a request whose client left while it was decided', async () => {
    const { http, close } = limiterWith({ limit: undefined, window: undefined, concurrency: 1 });
    const first = await http.check(req('a'));
    const res = Object.assign(response(200), { closed: true });
    http.countByOutcome(first, req('a'), undefined, res);
    await expect.poll(async () => (await http.check(req('b'))).action).toBe('next');
    await close();
  });

  it("gives the outer budget back when the identity's own refuses", async () => {
    const { http, peek, close } = limiterWith({ limit: 2 });
    await http.check(req('a'));
    await http.check(req('a'));
    expect([await peek('user:a'), await peek('org:acme')]).toEqual([0, 0]);
    // The same user within another organisation, on the same store: its own budget refuses.
    const elsewhere = createHttpLimiter({
      store: http.store,
      limit: 2,
      window: '1h',
      identify: () => ({ key: 'user:a', within: 'org:globex' }),
    });
    const refused = await elsewhere.check(req('a'));
    expect(refused).toMatchObject({ action: 'respond', status: 429 });
    await expect.poll(async () => (await elsewhere.limiter.peek('org:globex')).remaining).toBe(2);
    await elsewhere.close();
    await close();
  });

  it('reports the decision with less left, and gives both back for an outcome that does not count', async () => {
    const { http, peek, close } = limiterWith({ skipFailedRequests: true });
    const verdict = await http.check(req('a'));
    const next = await http.check(req('b'));
    expect(next.decision?.remaining).toBe(1);
    expect([await peek('user:a'), await peek('org:acme')]).toEqual([2, 1]);
    const failed = response(500);
    http.countByOutcome(verdict, req('a'), undefined, failed);
    failed.finish();
    await expect.poll(() => peek('org:acme')).toBe(2);
    expect(await peek('user:a')).toBe(3);
    await close();
  });

  it('reports a within that is not a non-empty string, and lets the failure mode decide', async () => {
    const { http, errors, close } = limiterWith({
      identify: () => ({ key: 'user:a', within: '' }),
    });
    expect((await http.check(req('a'))).action).toBe('next');
    expect(errors[0]).toBeInstanceOf(TypeError);
    expect(errors[0]?.message).toMatch(/`identify` returned a within/);
    await close();
  });
});
