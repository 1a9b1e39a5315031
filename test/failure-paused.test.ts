// Failure policy on a silent Redis (SIGSTOP): the deadline, the circuit breaker, close(), late sends.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { describe, expect, it, vi } from 'vitest';
import { type Decision, SentinelError } from '../packages/core/src/index.ts';
import {
  CLIENT_SETTINGS,
  clientOf,
  limiterOn,
  ownServer,
  RECOMMENDED,
  readyClient,
  timed,
} from './harness/own-redis.ts';
import type { RedisProcess } from './harness/redis-server.ts';

/** Counts the calls that send Sentinel's code to Redis: FCALL, or EVALSHA and EVAL. */
function spyOnSends(client: Redis): { count(): number } {
  const spies = (['fcall', 'evalsha', 'eval'] as const).map((command) => vi.spyOn(client, command));
  return { count: () => spies.reduce((sum, spy) => sum + spy.mock.calls.length, 0) };
}

describe.each(Object.entries(CLIENT_SETTINGS))('with %s', (_, settings) => {
  it('degrades a call with STORE_TIMEOUT once the deadline passes', async () => {
    const server = await ownServer();
    const client = await readyClient(server, settings);
    const { warmUp, limiter, errors } = limiterOn(client, { timeout: 50, breaker: false });
    await warmUp();

    server.pause();
    const { value, ms } = await timed(limiter.consume('user'));
    expect(value).toMatchObject({ allowed: true, degraded: 'allow' });
    // Not long before the deadline (busy is not down), and never hanging: typically 48 to 50 ms,
    // as its timer wakes 2 ms before the timeout, when the call may give up; the bound is ten
    // times that.
    expect(ms).toBeGreaterThanOrEqual(45);
    expect(ms).toBeLessThan(600);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(SentinelError);
    expect(errors[0]?.code).toBe('STORE_TIMEOUT');
  });

  it('opens the breaker after 3 timeouts, skips Redis, then resumes after the cool-down', async () => {
    const server = await ownServer();
    const client = await readyClient(server, settings);
    const cooldownMs = 400;
    const { warmUp, limiter, errors } = limiterOn(client, { breaker: { failures: 3, cooldownMs } });
    await warmUp();
    const sent = spyOnSends(client);

    server.pause();
    for (let i = 0; i < 3; i++) {
      expect((await limiter.consume('user')).degraded).toBe('allow');
    }
    const openedAt = Date.now();
    expect(sent.count()).toBe(3);
    expect(errors.map((error) => error.code)).toEqual(Array(3).fill('STORE_TIMEOUT'));

    // While open, no call reaches Redis, so none waits for it.
    for (let i = 0; i < 50; i++) {
      const decision = await limiter.consume('user');
      expect(decision).toMatchObject({ allowed: true, degraded: 'allow' });
      // Answered without the store: no store error to carry.
      expect(decision.error).toBeUndefined();
    }
    expect(sent.count()).toBe(3);

    server.resume();
    let decision: Decision;
    do {
      await sleep(20);
      decision = await limiter.consume('user');
    } while (decision.degraded !== undefined && Date.now() - openedAt < cooldownMs + 3000);
    expect(decision.degraded).toBeUndefined();
    expect(decision.allowed).toBe(true);
    // Redis was back long before, but the breaker held it off for the whole cool-down.
    expect(Date.now() - openedAt).toBeGreaterThanOrEqual(cooldownMs - 50);
  });

  it('lets one probe through after the cool-down and reopens when it times out', async () => {
    const server = await ownServer();
    const client = await readyClient(server, settings);
    const cooldownMs = 150;
    const { warmUp, limiter } = limiterOn(client, { breaker: { failures: 1, cooldownMs } });
    await warmUp();
    const sent = spyOnSends(client);

    server.pause();
    expect((await limiter.consume('user')).degraded).toBe('allow');
    expect(sent.count()).toBe(1);
    await sleep(cooldownMs + 20);

    const settled: number[] = [];
    const burst = Array.from({ length: 10 }, (_, i) =>
      limiter.consume('user').then((decision) => {
        settled.push(i);
        return decision;
      }),
    );
    const results = await Promise.all(burst);
    expect(results.every((decision) => decision.degraded === 'allow')).toBe(true);
    expect(sent.count()).toBe(2);
    // Only the probe, the first call, went to Redis and waited for the deadline; the others were
    // answered without it, before it.
    expect(results[0]?.error?.code).toBe('STORE_TIMEOUT');
    expect(results.slice(1).every((decision) => decision.error === undefined)).toBe(true);
    expect(settled.at(-1)).toBe(0);
    // The failed probe reopened the breaker.
    expect((await limiter.consume('user')).error).toBeUndefined();
    expect(sent.count()).toBe(2);
  });

  it('settles calls in flight when the limiter is closed', async () => {
    const server = await ownServer();
    const client = await readyClient(server, settings);
    const { warmUp, limiter, errors } = limiterOn(client, { timeout: 5000, breaker: false });
    await warmUp();

    server.pause();
    const started = performance.now();
    const inFlight = Promise.all(Array.from({ length: 10 }, () => limiter.consume('user')));
    await sleep(20);
    await limiter.close();
    const decisions = await inFlight;
    // Well before the 5 s deadline: only close() can have settled them.
    expect(performance.now() - started).toBeLessThan(1000);
    expect(decisions.every((d) => d.allowed && d.degraded === 'allow')).toBe(true);
    expect(errors).toHaveLength(10);
    expect(errors.every((e) => e.code === 'STORE_UNAVAILABLE')).toBe(true);
  });

  it('settles calls held for the first connection when the limiter is closed', async () => {
    const server = await ownServer();
    server.pause();
    // The kernel accepts the connection, but the ready check never gets an answer.
    const client = clientOf(server.url, settings);
    const { limiter, errors } = limiterOn(client, { connectTimeout: 5000, breaker: false });

    const started = performance.now();
    const held = Promise.all(Array.from({ length: 10 }, () => limiter.consume('user')));
    await sleep(50);
    expect(client.status).not.toBe('ready');
    await limiter.close();
    const decisions = await held;
    expect(performance.now() - started).toBeLessThan(1000);
    expect(decisions.every((d) => d.degraded === 'allow')).toBe(true);
    expect(errors).toHaveLength(10);
  });
});

describe('a call whose deadline has passed', () => {
  it('never sends the EVAL fallback of a call whose deadline has passed', async () => {
    const server = await ownServer();
    const client = await readyClient(server, RECOMMENDED);
    // A fresh server has no scripts, so the call's EVALSHA will be answered NOSCRIPT.
    const { limiter, errors, prefix } = limiterOn(client, { breaker: false });

    server.pause();
    const decision = await limiter.consume('late');
    expect(decision.degraded).toBe('allow');
    expect(errors[0]?.code).toBe('STORE_TIMEOUT');

    server.resume();
    // The EVALSHA already in the socket runs now (that is not a re-send) and fails NOSCRIPT;
    // nothing may follow it, since its caller was answered long ago.
    await client.ping();
    await sleep(100);
    await client.ping();
    const admin = clientOf(server.url, {});
    expect(await admin.keys(`${prefix}:*`)).toEqual([]);
    // The check can see a key: a call made now loads the script and counts.
    expect((await limiter.consume('late')).degraded).toBeUndefined();
    expect(await admin.keys(`${prefix}:*`)).toHaveLength(1);
  });
});

describe('the deadline timer', () => {
  it('gives each call up once its own deadline has passed, not on a later tick', async () => {
    const server = await ownServer();
    const client = await readyClient(server, RECOMMENDED);
    // A long timeout, so that a timer ticking at a fraction of it (as a periodic one would, a
    // fifth of it apart) shows as hundreds of ms late for calls sent between its ticks.
    const timeout = 2_000;
    const { warmUp, limiter, errors } = limiterOn(client, { timeout, breaker: false });
    await warmUp();

    server.pause();
    const waits: Promise<{ value: Decision; ms: number }>[] = [];
    for (let i = 0; i < 5; i++) {
      waits.push(timed(limiter.consume(`user-${i}`)));
      await sleep(90);
    }
    for (const { value, ms } of await Promise.all(waits)) {
      expect(value.degraded).toBe('allow');
      // Typically a millisecond or two before the timeout; a periodic timer could be 400 ms late.
      expect(ms).toBeGreaterThanOrEqual(timeout - 5);
      expect(ms).toBeLessThan(timeout + 200);
    }
    expect(errors.map((error) => error.code)).toEqual(Array(5).fill('STORE_TIMEOUT'));
    // Planned 2 ms before the timeout, so that a timer waking late still answers within it.
    expect(errors[0]?.message).toContain(`sent nothing for ${timeout - 2} ms`);
  });

  it('gives up on the calls sent together in one check, with one error for them all', async () => {
    const server = await ownServer();
    const client = await readyClient(server, RECOMMENDED);
    const { warmUp, limiter, errors } = limiterOn(client);
    await warmUp();

    server.pause();
    // Made in one turn of the event loop, so sent as one batch under one deadline. An error
    // apiece would capture a stack trace apiece: with thousands in flight, a stall of
    // milliseconds on the loop that is about to answer them.
    const decisions = await Promise.all(
      Array.from({ length: 50 }, (_, i) => limiter.consume(`user-${i}`)),
    );
    expect(decisions.map((decision) => decision.degraded)).toEqual(Array(50).fill('allow'));
    expect(errors).toHaveLength(50);
    expect(new Set(errors).size).toBe(1);
    expect(errors[0]?.code).toBe('STORE_TIMEOUT');
    expect(decisions[49]?.error).toBe(errors[0]);
  });
});

describe('a silence shorter than the timeout', () => {
  const PAUSE_MS = 120;
  const TIMEOUT_MS = 200;

  /** Stops the server for PAUSE_MS, as a slow fork or a long command would. */
  function hiccup(server: RedisProcess): void {
    server.pause();
    setTimeout(() => server.resume(), PAUSE_MS);
  }

  it('does not degrade a call that Redis answers late but within the timeout', async () => {
    const server = await ownServer();
    const client = await readyClient(server, {});
    const { warmUp, limiter, errors } = limiterOn(client, { timeout: TIMEOUT_MS, breaker: false });
    await warmUp();

    hiccup(server);
    const { value: decision, ms } = await timed(limiter.consume('user'));
    expect(ms).toBeGreaterThanOrEqual(PAUSE_MS - 10);
    expect(decision.degraded).toBeUndefined();
    expect(decision).toMatchObject({ allowed: true, remaining: 9 });
    expect(errors).toEqual([]);
  });

  it('does not degrade a call whose NOSCRIPT and EVAL replies each come within the timeout', async () => {
    const server = await ownServer();
    const client = await readyClient(server, {});
    // A fresh server has no scripts: the EVALSHA is answered NOSCRIPT and the store sends EVAL.
    const { limiter, errors } = limiterOn(client, { timeout: TIMEOUT_MS, breaker: false });
    const evalScript = client.eval.bind(client) as (...args: unknown[]) => Promise<unknown>;
    // The server hiccups again just as the EVAL goes out: each silence is shorter than the
    // timeout, but the two together are longer.
    const sentEval = vi.spyOn(client, 'eval').mockImplementation(((...args: unknown[]) => {
      hiccup(server);
      return evalScript(...args);
    }) as never);

    hiccup(server);
    const decision = await limiter.consume('user');
    expect(sentEval).toHaveBeenCalledTimes(1);
    expect(errors.map((error) => error.code)).toEqual([]);
    expect(decision.degraded).toBeUndefined();
    expect(decision).toMatchObject({ allowed: true, remaining: 9 });
  });
});

describe('a server that has lately been slow to answer', () => {
  it('waits up to twice its longest recent wait before calling it silent', async () => {
    const server = await ownServer();
    const client = await readyClient(server, {});
    // A 200 ms deadline leaves room for a 150 ms wait that is answered, not given up on.
    const { warmUp, limiter, errors } = limiterOn(client, { timeout: 200, breaker: false });
    await warmUp();

    server.pause();
    setTimeout(() => server.resume(), 150);
    expect((await limiter.consume('user')).degraded).toBeUndefined();

    server.pause();
    const { value, ms } = await timed(limiter.consume('user'));
    expect(value.degraded).toBe('allow');
    expect(errors.map((error) => error.code)).toEqual(['STORE_TIMEOUT']);
    // The deadline has stretched to about 300 ms; unstretched, the call fails at 200 to 215.
    expect(ms).toBeGreaterThanOrEqual(280);
    expect(ms).toBeLessThan(3000);
  });
});
