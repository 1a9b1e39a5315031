// `shed` beside an identity's own policies: the fleet's slot and the identity's budget are taken
// in one script call, all or nothing, on every store, and each is observed as its own limiter's.
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { connect, uniquePrefix } from '../../../../test/harness/clients.ts';
import { scriptCallsSinceLastLook } from '../../../../test/harness/connection-checks.ts';
import { clientOf, ownServer, waitFor } from '../../../../test/harness/own-redis.ts';
import type { NodeResponse } from '../../src/http/refund-by-outcome.ts';
import {
  createHttpLimiter,
  type DecisionEvent,
  type HttpLimiterOptions,
  MemoryStore,
  type Store,
} from '../../src/index.ts';
import { STORES, type StoreName } from '../stores.ts';

const client = (ip: string) => ({ headers: {}, ip });

/** A Node response that closes when told, as the adapters' raw responses do. */
function response(state: { closed?: boolean } = {}): NodeResponse & { close(): void } {
  const emitter = new EventEmitter();
  return Object.assign(emitter, {
    ...state,
    statusCode: 200,
    writableFinished: true,
    close() {
      emitter.emit('finish');
      emitter.emit('close');
    },
  }) as unknown as NodeResponse & { close(): void };
}

/** The store options of a limiter on the named store: a Redis client as `redis`, as users give theirs. */
function storeOptionsOf(name: StoreName): Partial<HttpLimiterOptions> & { store?: Store } {
  if (name === 'memory') return { store: new MemoryStore() };
  return { redis: connect(name === 'redis (ioredis 6)' ? 'ioredis 6' : 'ioredis 5') };
}

function limiterOn(name: StoreName, options: Partial<HttpLimiterOptions>) {
  const events: DecisionEvent[] = [];
  const stores = storeOptionsOf(name);
  const http = createHttpLimiter({
    prefix: uniquePrefix('shed-beside'),
    ...stores,
    observe: { decision: (event) => events.push(event) },
    ...options,
  });
  return {
    http,
    events,
    status: async (ip: string) => {
      const verdict = await http.check(client(ip));
      return verdict.action === 'respond' ? verdict.status : 200;
    },
    close: async () => {
      await http.close();
      await stores.store?.close();
    },
  };
}

describe.each(STORES)('shed beside the identity’s policies, on the %s store', (name) => {
  it("refuses for the identity's own policies without taking a slot of the fleet's", async () => {
    const { http, status, close } = limiterOn(name, {
      limit: 1,
      window: '1m',
      shed: { concurrency: 2, reserve: 0 },
    });
    const first = await http.check(client('198.51.100.1'));
    expect(first.action).toBe('next');
    // Its budget spent: refused by it, and the fleet's second slot stays free for another.
    expect(await status('198.51.100.1')).toBe(429);
    expect(await status('198.51.100.2')).toBe(200);
    // Both slots held now: shed, and the identity's budget left as it was.
    expect(await status('198.51.100.3')).toBe(503);
    expect((await http.limiter.peek('ip:198.51.100.3')).remaining).toBe(1);
    // The first request's response ends: its slot comes back.
    const raw = response();
    http.countByOutcome(first, client('198.51.100.1'), {}, raw);
    raw.close();
    await expect.poll(() => status('198.51.100.3')).toBe(200);
    await close();
  });

  it('counts the fleet in the same slots whether it goes beside the policies or ahead of them', async () => {
    const stores = storeOptionsOf(name);
    const prefix = uniquePrefix('shed-paths');
    const shed = { concurrency: 2, reserve: 0 };
    // A cost above 1 takes the fleet's slot in a call of its own, ahead of the identity's.
    const beside = createHttpLimiter({ ...stores, prefix, limit: 10, window: '1m', shed });
    const ahead = createHttpLimiter({ ...stores, prefix, limit: 10, window: '1m', shed, cost: 2 });
    const status = async (limiter: typeof beside, ip: string) => {
      const verdict = await limiter.check(client(ip));
      return verdict.action === 'respond' ? verdict.status : 200;
    };
    expect(await status(beside, '198.51.100.1')).toBe(200);
    expect(await status(ahead, '198.51.100.2')).toBe(200);
    expect(await status(beside, '198.51.100.3')).toBe(503);
    expect(await status(ahead, '198.51.100.4')).toBe(503);
    await Promise.all([beside.close(), ahead.close()]);
    await stores.store?.close();
  });

  it("observes the fleet's decisions under its own tiers, and the identity's only when asked", async () => {
    const { http, events, status, close } = limiterOn(name, {
      limit: 1,
      window: '1m',
      shed: { concurrency: 4, reserve: 0.5, critical: (req) => req.ip === '198.51.100.9' },
    });
    const seen = () =>
      events.splice(0).map((e) => `${e.decision.tier ?? ''}:${e.identity}:${e.outcome}`);
    const admitted = await http.check(client('198.51.100.1'));
    expect(admitted.action).toBe('next');
    expect(seen()).toEqual(['shed:fleet:allowed', ':ip:198.51.100.1:allowed']);
    // The identity refuses: the fleet had room, and holds nothing for it.
    expect(await status('198.51.100.1')).toBe(429);
    expect(seen()).toEqual(['shed:fleet:allowed', ':ip:198.51.100.1:limited']);
    expect(await status('198.51.100.2')).toBe(200);
    seen();
    // The normal share (2 of 4) is held: shed, and the identity's policies are never asked.
    expect(await status('198.51.100.3')).toBe(503);
    expect(seen()).toEqual(['shed:fleet:limited']);
    // A critical request takes the reserve.
    expect(await status('198.51.100.9')).toBe(200);
    expect(seen()).toEqual(['shed-critical:fleet:allowed', ':ip:198.51.100.9:allowed']);
    // Each decision the store made carries the time it took.
    await http.check(client('198.51.100.4'));
    expect(events.every((e) => e.storeMs !== undefined)).toBe(true);
    expect(admitted.action === 'next' && admitted.fleet?.lease?.policies).toEqual(['fleet']);
    await close();
  });
});

describe('on a Redis of its own', () => {
  it("takes the fleet's slot and the identity's policies in one script call", async () => {
    const server = await ownServer();
    const admin = clientOf(server.url);
    const prefix = uniquePrefix('shed-one-call');
    const http = createHttpLimiter({
      redis: clientOf(server.url),
      prefix,
      policies: [
        { limit: 100, window: '1m' },
        { name: 'slots', concurrency: 5, lease: '30s' },
      ],
      shed: { concurrency: 10 },
    });
    await http.check(client('198.51.100.1'));
    const calls = scriptCallsSinceLastLook([admin]);
    await calls();
    const verdict = await http.check(client('198.51.100.1'));
    expect(verdict.action).toBe('next');
    expect(await calls()).toBe(1);
    // The rate policy, the identity's slot and the fleet's, all taken.
    expect(verdict.action === 'next' && verdict.decision?.lease?.policies).toEqual(['slots']);
    expect(verdict.action === 'next' && verdict.fleet?.lease?.policies).toEqual(['fleet']);
    // Its response ends: both slots are given back, sent in one tick and so in one script call.
    const slots = async () => {
      const sets = (await admin.keys(`${prefix}*`)).filter((key) => key.endsWith(':concurrency'));
      const held = await Promise.all(sets.map((key) => admin.zcard(key)));
      return held.reduce((sum, n) => sum + n, 0);
    };
    expect(await slots()).toBe(4);
    http.countByOutcome(verdict, client('198.51.100.1'), {}, response({ closed: true }));
    await waitFor(async () => (await slots()) === 2, 5_000, 'the slots to come back');
    expect(await calls()).toBe(1);
    // A cost above 1 takes the fleet's one slot first, in a call of its own.
    const costly = createHttpLimiter({
      redis: clientOf(server.url),
      prefix: uniquePrefix('shed-costly'),
      limit: 100,
      window: '1m',
      cost: () => 3,
      shed: { concurrency: 10 },
    });
    await calls();
    const paid = await costly.check(client('198.51.100.1'));
    expect(paid.action === 'next' && paid.decision?.remaining).toBe(97);
    expect(await calls()).toBe(2);
    await Promise.all([http.close(), costly.close()]);
  });

  it('lets requests in when Redis stops answering, after one failed call for both counts', async () => {
    const server = await ownServer();
    const errors: Error[] = [];
    const http = createHttpLimiter({
      redis: clientOf(server.url),
      prefix: uniquePrefix('shed-down'),
      limit: 10,
      window: '1m',
      shed: { concurrency: 10 },
      onError: (error) => errors.push(error),
    });
    expect((await http.check(client('198.51.100.1'))).action).toBe('next');
    server.pause();
    const started = performance.now();
    const verdict = await http.check(client('198.51.100.1'));
    const took = performance.now() - started;
    expect(verdict.action).toBe('next');
    expect(verdict.action === 'next' && verdict.decision?.degraded).toBe('allow');
    expect(verdict.action === 'next' && verdict.fleet).toBeUndefined();
    // The deadline is 50 ms: 1 s catches a hang, not a slow machine.
    expect(took).toBeLessThan(1_000);
    // One call failed, and both decisions carry its error: each is reported once.
    expect(errors).toHaveLength(2);
    expect(errors[0]).toBe(errors[1]);
    server.resume();
    await http.close();
  });
});
