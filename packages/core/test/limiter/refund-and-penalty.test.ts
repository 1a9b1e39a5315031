// Refunds, penalties and the penalty box, on every store and algorithm: quota given back only as
// taken and only into the window charged, quota taken past the limit, and a box that holds.
import { afterEach, describe, expect, it } from 'vitest';
import { uniquePrefix } from '../../../../test/harness/clients.ts';
import { holdReplies } from '../../../../test/harness/late-reply.ts';
import { clientOf, owned, ownServer } from '../../../../test/harness/own-redis.ts';
import {
  ALGORITHMS,
  type Algorithm,
  createLimiter,
  type Limiter,
  MemoryStore,
  type PolicyOptions,
  type SentinelError,
} from '../../src/index.ts';
import { type Clock, limiterOn, manualClock, STORES } from '../stores.ts';

const open: Limiter[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((limiter) => limiter.close()));
});

const MINUTE = 60_000;
/** Windowed algorithms count in epoch-aligned windows: starting on a boundary keeps counts plain. */
const WINDOWED: readonly Algorithm[] = [
  'fixed-window',
  'sliding-window-counter',
  'sliding-window-log',
];

describe.each(STORES)('on %s', (store) => {
  function limiter(policy: Omit<PolicyOptions, 'window'> & { window?: PolicyOptions['window'] }) {
    const clock: Clock = manualClock();
    const made = limiterOn(store, { policies: { window: '1m', ...policy }, clock: clock.now });
    open.push(made);
    return { limits: made, clock };
  }

  describe.each(ALGORITHMS)('with %s', (algorithm) => {
    it('gives back what an admitted consume took, once', async () => {
      const { limits } = limiter({ limit: 3, algorithm });
      const taken = [];
      for (let i = 0; i < 3; i++) taken.push(await limits.consume('user'));
      const refused = await limits.consume('user');
      expect(refused.allowed).toBe(false);

      expect(await limits.refund('user', { decision: taken[0] as never })).toBe(true);
      // Given back once: the decision has nothing left to give.
      expect(await limits.refund('user', { decision: taken[0] as never })).toBe(false);
      // Nothing was taken by a refusal or a peek.
      expect(await limits.refund('user', { decision: refused })).toBe(false);
      expect(await limits.refund('user', { decision: await limits.peek('user') })).toBe(false);
      expect((await limits.consume('user')).allowed).toBe(true);
      expect((await limits.consume('user')).allowed).toBe(false);
    });

    it('gives back part of a cost, then the rest, and never past the limit', async () => {
      const { limits } = limiter({ limit: 5, algorithm });
      const taken = await limits.consume('user', { cost: 3 });
      expect(taken.remaining).toBe(2);
      expect(await limits.refund('user', { decision: taken, cost: 1 })).toBe(true);
      expect((await limits.peek('user')).remaining).toBe(3);
      // Asking for more than is left gives back what is left.
      expect(await limits.refund('user', { decision: taken, cost: 10 })).toBe(true);
      expect((await limits.peek('user')).remaining).toBe(5);
      expect(await limits.refund('user', { decision: taken })).toBe(false);
      expect((await limits.peek('user')).remaining).toBe(5);
    });

    it('refuses a refund for another key with a TypeError', async () => {
      const { limits } = limiter({ limit: 5, algorithm });
      const taken = await limits.consume('user');
      await expect(limits.refund('someone-else', { decision: taken })).rejects.toThrow(
        expect.objectContaining({ name: 'TypeError', message: expect.stringMatching(/`key`/) }),
      );
    });

    it('takes a penalty past what is left, and the identity waits for it', async () => {
      const { limits, clock } = limiter({ limit: 5, algorithm });
      expect(await limits.penalize('user', { cost: 3 })).toMatchObject({ remaining: 2 });
      const over = await limits.penalize('user', { cost: 5 });
      expect(over).toMatchObject({ allowed: false, remaining: 0 });
      expect(over.retryAfterMs).toBeGreaterThan(0);
      const refused = await limits.consume('user');
      expect(refused.allowed).toBe(false);
      // Admitted once the wait it was told has passed, not before.
      clock.advance(refused.retryAfterMs - 1);
      expect((await limits.consume('user')).allowed).toBe(false);
      clock.advance(1);
      expect((await limits.consume('user')).allowed).toBe(true);
    });

    it('holds an identity in the box for blockFor once it is refused, with an honest retry', async () => {
      const { limits, clock } = limiter({ limit: 2, algorithm, blockFor: '10m' });
      expect((await limits.consume('user')).allowed).toBe(true);
      expect((await limits.consume('user')).allowed).toBe(true);
      const refused = await limits.consume('user');
      expect(refused).toMatchObject({ allowed: false, retryAfterMs: 10 * MINUTE });
      // The window has long refilled, but the box holds for the rest of its time.
      clock.advance(2 * MINUTE);
      expect(await limits.peek('user')).toMatchObject({ allowed: false, retryAfterMs: 8 * MINUTE });
      expect(await limits.consume('user')).toMatchObject({
        allowed: false,
        remaining: 0,
        retryAfterMs: 8 * MINUTE,
      });
      clock.advance(8 * MINUTE);
      expect((await limits.consume('user')).allowed).toBe(true);
      // Another identity was never in it.
      expect((await limits.consume('other')).allowed).toBe(true);
    });
  });

  it.each(WINDOWED)(
    'gives nothing back into a window other than the one charged, with %s',
    async (algorithm) => {
      const { limits, clock } = limiter({ limit: 3, algorithm });
      const charged = await limits.consume('user');
      // Two windows on: the charged one is neither current nor, for the counter, the previous.
      clock.advance(2 * MINUTE);
      await limits.consume('user');
      expect((await limits.peek('user')).remaining).toBe(2);
      expect(await limits.refund('user', { decision: charged })).toBe(true);
      expect((await limits.peek('user')).remaining).toBe(2);
    },
  );

  it('gives a sliding window counter back into the previous window, which still weighs', async () => {
    const { limits, clock } = limiter({ limit: 4, algorithm: 'sliding-window-counter' });
    const taken = [];
    for (let i = 0; i < 4; i++) taken.push(await limits.consume('user'));
    // A quarter into the next window, the previous one's 4 still weigh 3.
    clock.advance(MINUTE + MINUTE / 4);
    expect((await limits.peek('user')).remaining).toBe(1);
    for (const decision of taken.slice(0, 2)) {
      expect(await limits.refund('user', { decision })).toBe(true);
    }
    // 2 left in the previous window weigh ceil(1.5) = 2.
    expect((await limits.peek('user')).remaining).toBe(2);
  });
});

describe('refund', () => {
  it('does nothing for a degraded decision', async () => {
    const limits = createLimiter({
      store: new MemoryStore(),
      tiers: { FREE: { limit: 1, window: '1m' } },
      onError: () => {},
    });
    open.push(limits);
    const degraded = await limits.consume('user', { tier: 'GOLD' });
    expect(degraded.degraded).toBe('allow');
    expect(await limits.refund('user', { decision: degraded })).toBe(false);
  });

  it('refuses a bad cost with a TypeError naming it', async () => {
    const limits = createLimiter({ store: new MemoryStore(), limit: 1, window: '1m' });
    open.push(limits);
    const decision = await limits.consume('user');
    await expect(limits.refund('user', { decision, cost: 0 })).rejects.toThrow(/`cost`/);
    await expect(limits.penalize('user', { cost: -1 })).rejects.toThrow(/`cost`/);
  });
});

// Redis ran the call in time, but its reply came after the 50 ms deadline: the call rejected,
// yet it happened.
describe('a refund or a penalty whose reply comes after the store gave up on it', () => {
  async function heldLimiter() {
    const server = await ownServer();
    const client = clientOf(server.url);
    const errors: SentinelError[] = [];
    const lateRefunds: unknown[] = [];
    const limits = owned(
      createLimiter({
        redis: client,
        prefix: uniquePrefix('late'),
        limit: 10,
        window: '1h',
        onError: (error) => void errors.push(error),
        observe: { lateRefund: (event) => void lateRefunds.push(event) },
      }),
    );
    await limits.peek('warm-up');
    return { client, errors, lateRefunds, limits };
  }

  it('counts a refund that rejected but ran as given back: the decision has no more to give', async () => {
    const { client, lateRefunds, limits } = await heldLimiter();
    const first = await limits.consume('user');
    await limits.consume('user');
    const held = holdReplies(client, 200);
    await expect(limits.refund('user', { decision: first })).rejects.toMatchObject({
      code: 'STORE_TIMEOUT',
    });
    await held;
    // Redis gave the unit back, and the late reply took it off the decision again.
    expect((await limits.peek('user')).remaining).toBe(9);
    expect(await limits.refund('user', { decision: first })).toBe(false);
    expect((await limits.peek('user')).remaining).toBe(9);
    // It gave back a consume that was answered admitted: no refund of its own.
    expect(lateRefunds).toEqual([]);
  });

  it('keeps a penalty that rejected but ran: the caller asked for it', async () => {
    const { client, errors, lateRefunds, limits } = await heldLimiter();
    const held = holdReplies(client, 200);
    await expect(limits.penalize('user', { cost: 3 })).rejects.toMatchObject({
      code: 'STORE_TIMEOUT',
    });
    await held;
    expect((await limits.peek('user')).remaining).toBe(7);
    expect(lateRefunds).toEqual([]);
    // The rejection told the caller; nothing more was reported.
    expect(errors).toEqual([]);
  });
});
