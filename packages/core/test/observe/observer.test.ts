// `observe` and `logger`: every decision seen with its identity and timing, store and breaker
// transitions seen once each, on a real Redis that goes down and comes back.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { uniquePrefix } from '../../../../test/harness/clients.ts';
import { holdReplies } from '../../../../test/harness/late-reply.ts';
import {
  clientOf,
  limiterOn,
  owned,
  ownServer,
  RECOMMENDED,
  readyClient,
  waitFor,
} from '../../../../test/harness/own-redis.ts';
import {
  type BreakerEvent,
  createLimiter,
  type DecisionEvent,
  fingerprint,
  MemoryStore,
  type Observer,
  type StoreErrorEvent,
  type StoreStateEvent,
} from '../../src/index.ts';

/** Every event an observer hears, in order. */
function recorder() {
  const decisions: DecisionEvent[] = [];
  const storeErrors: StoreErrorEvent[] = [];
  const transitions: (StoreStateEvent | BreakerEvent)[] = [];
  const observer = {
    decision: (e: DecisionEvent) => decisions.push(e),
    storeError: (e: StoreErrorEvent) => storeErrors.push(e),
    store: (e: StoreStateEvent) => transitions.push(e),
    breaker: (e: BreakerEvent) => transitions.push(e),
  };
  return { observer, decisions, storeErrors, transitions };
}

/** A pino-shaped logger that keeps its lines. */
function recordingLogger() {
  const lines: { level: string; object: object; message: string }[] = [];
  const log = (level: string) => (object: object, message: string) =>
    lines.push({ level, object, message });
  return { lines, logger: { info: log('info'), warn: log('warn') } };
}

let warnings: string[] = [];
const onWarning = (warning: Error) => warnings.push(warning.message);
beforeEach(() => {
  warnings = [];
  process.on('warning', onWarning);
});
afterEach(() => {
  process.off('warning', onWarning);
});

describe('observe', () => {
  it('sees every consume and peek with its outcome, identity and store time', async () => {
    const { observer, decisions } = recorder();
    const limiter = owned(
      createLimiter({ store: new MemoryStore(), limit: 2, window: '1m', observe: observer }),
    );
    for (let i = 0; i < 3; i++) await limiter.consume('user-1');
    await limiter.peek('user-1');
    await limiter.consume('a key with spaces');

    expect(decisions.map((e) => [e.outcome, e.consumed, e.identity])).toEqual([
      ['allowed', true, 'user-1'],
      ['allowed', true, 'user-1'],
      ['limited', true, 'user-1'],
      ['limited', false, 'user-1'],
      // A key that is not stored as written reaches observers as its fingerprint, never raw.
      ['allowed', true, `~${fingerprint('a key with spaces')}`],
    ]);
    expect(decisions[2]?.decision).toMatchObject({ allowed: false, remaining: 0 });
    for (const event of decisions) {
      expect(event.storeMs).toBeGreaterThanOrEqual(0);
      expect(event.storeMs).toBeLessThan(1000);
    }
  });

  it('calls an unknown tier degraded, with no store time', async () => {
    const { observer, decisions } = recorder();
    const limiter = owned(
      createLimiter({
        store: new MemoryStore(),
        tiers: { FREE: { limit: 1, window: '1m' } },
        observe: [observer],
        onError: () => {},
      }),
    );
    await limiter.consume('user', { tier: 'GOLD' });
    expect(decisions).toMatchObject([{ outcome: 'degraded', storeMs: undefined }]);
  });

  it('turns what an observer throws into a process warning, and still decides', async () => {
    const limiter = owned(
      createLimiter({
        store: new MemoryStore(),
        limit: 1,
        window: '1m',
        observe: {
          decision() {
            throw new Error('observer broke');
          },
        },
      }),
    );
    expect(await limiter.consume('user')).toMatchObject({ allowed: true });
    await waitFor(() => warnings.length > 0);
    expect(warnings).toEqual(['@sentinel/core: observe.decision threw: observer broke']);
  });

  it.each([
    [{ observe: 5 }, /`observe` must be an object with hooks/],
    [{ observe: { decisons() {} } }, /`observe\.decisons` is not a hook/],
    [{ observe: [{ decision: 'log' }] }, /`observe\[0\]\.decision` must be a function/],
    [
      { observe: { lateRefunds() {} } },
      /`observe\.lateRefunds` is not a hook; .* lateRefund, release$/,
    ],
    [{ logger: {} }, /`logger\.info` must be a function/],
    [{ logger: console.log }, /`logger` must be a pino-compatible logger/],
  ])('refuses %o at construction, naming the option', (options, message) => {
    expect(() => createLimiter({ limit: 1, window: '1m', ...(options as object) })).toThrow(
      expect.objectContaining({ name: 'TypeError', message: expect.stringMatching(message) }),
    );
  });
});

describe('store and breaker transitions on a Redis that goes down and comes back', () => {
  it('are seen once each, in order, while every failure is seen as a store error', async () => {
    const server = await ownServer();
    const client = await readyClient(server, RECOMMENDED);
    const { observer, decisions, storeErrors, transitions } = recorder();
    const { lines, logger } = recordingLogger();
    const { limiter, warmUp } = limiterOn(client, {
      // No onError: the logger takes the process warning's place, and logs transitions only.
      onError: undefined,
      observe: observer,
      logger,
      breaker: { failures: 3, cooldownMs: 100 },
    });
    await warmUp();
    expect(decisions.at(-1)).toMatchObject({ outcome: 'allowed' });
    expect(decisions.at(-1)?.storeMs).toBeGreaterThan(0);
    decisions.length = 0;

    await server.stop();
    await waitFor(() => client.status !== 'ready');
    for (let i = 0; i < 10; i++) await limiter.consume('user');
    expect(decisions.every((e) => e.outcome === 'degraded' && e.storeMs === undefined)).toBe(true);
    // Three failures open the breaker; the calls after it skip the store and fail nothing.
    expect(storeErrors.map((e) => [e.server, e.error.code])).toEqual(
      Array.from({ length: 3 }, () => ['', 'STORE_UNAVAILABLE']),
    );

    await server.restart();
    await waitFor(async () => (await limiter.consume('user')).degraded === undefined, 10_000);
    for (let i = 0; i < 5; i++) await limiter.consume('user');

    expect(transitions).toEqual([
      { server: '', state: 'down', error: storeErrors[0]?.error },
      { server: '', state: 'open' },
      { server: '', state: 'closed' },
      { server: '', state: 'up' },
    ]);
    expect(lines.map((l) => [l.level, l.message])).toEqual([
      [
        'warn',
        'Sentinel: the store is failing (STORE_UNAVAILABLE): decisions follow onStoreError until it answers',
      ],
      ['warn', 'Sentinel: circuit breaker open: calls skip the store'],
      ['info', 'Sentinel: circuit breaker closed: calls reach the store'],
      ['info', 'Sentinel: the store answers again'],
    ]);
    expect(lines[0]?.object).toMatchObject({ err: { code: 'STORE_UNAVAILABLE' } });
    expect(warnings).toEqual([]);
  });

  it('logs an error that is no store failure once per code, in place of the warning', async () => {
    const { lines, logger } = recordingLogger();
    const limiter = owned(
      createLimiter({
        redis: clientOf((await ownServer()).url),
        prefix: uniquePrefix('observe'),
        tiers: { FREE: { limit: 1, window: '1m' } },
        logger,
      }),
    );
    for (let i = 0; i < 3; i++) await limiter.consume('user', { tier: 'GOLD' });
    expect(lines.map((l) => [l.level, l.message])).toEqual([
      [
        'warn',
        "@sentinel/core: No tier named 'GOLD' (further UNKNOWN_TIER errors are not logged without onError)",
      ],
    ]);
    expect(warnings).toEqual([]);
  });
});

describe('a consume admitted after the store gave up on it', () => {
  it('is seen once as degraded, then once as a late refund, with its tier and cost', async () => {
    const server = await ownServer();
    const client = await readyClient(server, RECOMMENDED);
    const { observer, decisions, storeErrors } = recorder();
    const lateRefunds: Parameters<NonNullable<Observer['lateRefund']>>[0][] = [];
    const { limiter, warmUp } = limiterOn(client, {
      limit: undefined,
      window: undefined,
      tiers: { FREE: { limit: 10, window: '1h' }, PRO: { limit: 100, window: '1h' } },
      observe: [observer, { lateRefund: (event) => void lateRefunds.push(event) }],
    });
    await warmUp();
    decisions.length = 0;
    // Redis runs the consume in time, but its reply comes 200 ms later: past the deadline.
    const held = holdReplies(client, 200);
    const decision = await limiter.consume('tenant', { tier: 'PRO', cost: 5 });
    expect(decision.degraded).toBe('allow');
    await held;
    await waitFor(() => lateRefunds.length > 0);
    expect(lateRefunds).toEqual([
      { identity: 'tenant', tier: 'PRO', cost: 5, server: '', error: undefined },
    ]);
    // One decision, the degraded one: the refund is no decision.
    expect(decisions.map((e) => e.outcome)).toEqual(['degraded']);
    expect(storeErrors.map((e) => e.error.code)).toEqual(['STORE_TIMEOUT']);
    expect((await limiter.peek('tenant', { tier: 'PRO' })).remaining).toBe(100);
  });
});
