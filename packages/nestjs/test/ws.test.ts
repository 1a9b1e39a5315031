// socket.io gateways through SentinelGuard: messages counted per connection identity, a refusal as an 'exception' event, slots released by the handler's end.
import type { INestApplication } from '@nestjs/common';
import {
  byApiKey,
  byIp,
  chain,
  MemoryStore,
  QUOTA_EXCEEDED,
  type SentinelModuleOptions,
} from '@sentinel/nestjs';
import { io, type Socket } from 'socket.io-client';
import { afterEach, describe, expect, it } from 'vitest';
import { connect, uniquePrefix } from '../../../test/harness/clients.ts';
import { nestApp } from '../../../test/harness/nest-apps.ts';
import { waitFor } from '../../../test/harness/wait-for.ts';

const { createWsApp, gates } = (await import(
  nestApp('ws-app')
)) as typeof import('./apps/ws-app.ts');

const STORES = {
  memory: () => ({ store: new MemoryStore() }),
  // A deadline for a machine other suites load, as the other Nest suites give: the default 50 ms
  // would let a slow reply pass by the failure mode, which `failures` catches.
  redis: () => ({ redis: connect(), prefix: uniquePrefix('nest-ws'), timeout: 1_000 }),
};

/** What the limiters report failing: a test must not pass by the failure mode. */
const failures: string[] = [];
const onError = (error: Error) => failures.push(error.message);

const TENANTS: Record<string, string> = { 'key-alpha': 'alpha', 'key-beta': 'beta' };
const byTenantKey = () =>
  chain(byApiKey({ lookup: (key) => (TENANTS[key] ? { tenant: TENANTS[key] } : null) }), byIp());

const apps: INestApplication[] = [];
const sockets: Socket[] = [];
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.close();
  await Promise.all(apps.splice(0).map((app) => app.close()));
  expect(failures.splice(0)).toEqual([]);
});

/** What a message got: its handler's acknowledgement, or the guard's 'exception' event. */
type Reply = { answer: unknown } | { refused: Record<string, unknown> };

/**
 * Sends one message and waits for its reply. A refused message is never acknowledged: Nest's
 * exception filter emits 'exception' instead, so the next one on this socket is its answer.
 */
function send(socket: Socket, event: string, body?: unknown): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      socket.off('exception', onException);
      reject(new Error(`no reply to '${event}'`));
    }, 5_000);
    const onException = (problem: Record<string, unknown>) => {
      clearTimeout(timer);
      resolve({ refused: problem });
    };
    socket.once('exception', onException);
    socket.emit(event, body, (answer: unknown) => {
      clearTimeout(timer);
      socket.off('exception', onException);
      resolve({ answer });
    });
  });
}

const admitted = (reply: Reply) => 'answer' in reply;

/** A connection of its own (socket.io would share one per URL), with the handshake's headers. */
async function open(url: string, headers: Record<string, string> = {}): Promise<Socket> {
  const socket = io(url, {
    transports: ['websocket'],
    extraHeaders: headers,
    forceNew: true,
    reconnection: false,
  });
  sockets.push(socket);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('connect_error', reject);
  });
  return socket;
}

describe.each(['express', 'fastify'] as const)('socket.io gateways on %s', (platform) => {
  async function start(options: SentinelModuleOptions, global = true): Promise<string> {
    const app = await createWsApp({ platform, options: { onError, ...options }, global });
    apps.push(app);
    return app.getUrl();
  }

  describe.each(Object.keys(STORES) as Array<keyof typeof STORES>)('on the %s store', (store) => {
    it("counts one client's messages on one budget, and each identity on its own", async () => {
      const url = await start({
        ...STORES[store](),
        identify: byTenantKey(),
        limit: 3,
        window: '1m',
      });
      const alpha = await open(url, { 'x-api-key': 'key-alpha' });
      const beta = await open(url, { 'x-api-key': 'key-beta' });
      for (let i = 0; i < 3; i++)
        expect(await send(alpha, 'echo', i)).toMatchObject({ answer: { echoed: i } });
      expect(await send(alpha, 'echo', 3)).toHaveProperty('refused');
      for (let i = 0; i < 3; i++) expect(admitted(await send(beta, 'echo', i))).toBe(true);
      expect(admitted(await send(beta, 'echo', 3))).toBe(false);
      // Without a key, the client's address is counted: its budget is apart from both tenants'.
      expect(admitted(await send(await open(url), 'echo'))).toBe(true);
    });

    it('keeps the count of an identity that reconnects', async () => {
      const options: SentinelModuleOptions = {
        ...STORES[store](),
        identify: byTenantKey(),
        limit: 3,
        window: '1m',
      };
      const url = await start(options);
      const first = await open(url, { 'x-api-key': 'key-alpha' });
      expect(admitted(await send(first, 'echo'))).toBe(true);
      expect(admitted(await send(first, 'echo'))).toBe(true);
      const firstId = first.id;
      first.close();
      const again = await open(url, { 'x-api-key': 'key-alpha' });
      expect(again.id).not.toBe(firstId);
      expect(admitted(await send(again, 'echo'))).toBe(true);
      expect(admitted(await send(again, 'echo'))).toBe(false);
    });

    it('refuses with an exception event holding the problem, and the socket is answered after the window', async () => {
      const url = await start({ ...STORES[store](), limit: 2, window: '2s' });
      const socket = await open(url);
      await send(socket, 'echo');
      await send(socket, 'echo');
      const reply = await send(socket, 'echo');
      if (!('refused' in reply)) throw new Error('the third message was admitted');
      expect(reply.refused).toEqual({
        type: QUOTA_EXCEEDED,
        title: 'Too Many Requests',
        status: 429,
        detail: expect.stringMatching(/^Quota exceeded for 2-per-2s; retry in \d+ s\.$/),
        'violated-policies': ['2-per-2s'],
        headers: {
          'RateLimit-Policy': '"2-per-2s";q=2;w=2',
          RateLimit: expect.stringMatching(/^"2-per-2s";r=0;t=\d+$/),
          'Retry-After': expect.stringMatching(/^\d+$/),
        },
      });
      expect(socket.connected).toBe(true);
      const retryAfter = Number((reply.refused.headers as Record<string, string>)['Retry-After']);
      expect(retryAfter).toBeGreaterThan(0);
      await new Promise((resolve) => setTimeout(resolve, retryAfter * 1_000));
      await waitFor(async () => admitted(await send(socket, 'echo', 'again')), 5_000, 'an answer');
      expect(socket.connected).toBe(true);
    });
  });

  it('skips a handler marked @SkipRateLimit(), which counts nothing', async () => {
    const url = await start({ store: new MemoryStore(), limit: 2, window: '1m' });
    const socket = await open(url);
    for (let i = 0; i < 4; i++) expect(await send(socket, 'ping')).toEqual({ answer: 'pong' });
    expect(admitted(await send(socket, 'echo'))).toBe(true);
    expect(admitted(await send(socket, 'echo'))).toBe(true);
    expect(admitted(await send(socket, 'echo'))).toBe(false);
  });

  it('limits a handler by its own @RateLimit() group, apart from the module budget', async () => {
    const url = await start({ store: new MemoryStore(), limit: 10, window: '1m' });
    const socket = await open(url);
    expect(admitted(await send(socket, 'search', 'a'))).toBe(true);
    expect(admitted(await send(socket, 'search', 'b'))).toBe(true);
    expect(await send(socket, 'search', 'c')).toMatchObject({ refused: { status: 429 } });
    expect(admitted(await send(socket, 'echo'))).toBe(true);
  });

  it('counts a message once where the guard is bound both globally and on the gateway', async () => {
    const url = await start({ store: new MemoryStore(), limit: 3, window: '1m' });
    const socket = await open(`${url}/guarded`);
    for (let i = 0; i < 3; i++) expect(admitted(await send(socket, 'echo', i))).toBe(true);
    expect(admitted(await send(socket, 'echo'))).toBe(false);
  });

  it('limits only the gateway that binds the guard with @UseGuards(), without a global guard', async () => {
    const url = await start({ store: new MemoryStore(), limit: 1, window: '1m' }, false);
    const open1 = await open(url);
    for (let i = 0; i < 3; i++) expect(admitted(await send(open1, 'echo', i))).toBe(true);
    const guarded = await open(`${url}/guarded`);
    expect(admitted(await send(guarded, 'echo'))).toBe(true);
    expect(admitted(await send(guarded, 'echo'))).toBe(false);
  });

  it('holds a concurrency slot while a handler runs, and releases it when it answers or throws', async () => {
    const options = { ...STORES.redis(), identify: byTenantKey(), concurrency: 1 };
    const url = await start(options);
    const alpha = await open(url, { 'x-api-key': 'key-alpha' });
    const beta = await open(url, { 'x-api-key': 'key-beta' });
    for (const outcome of ['answer', 'throw'] as const) {
      const name = `${platform}-${outcome}`;
      // Its acknowledgement alone: the refusals below come as 'exception' events on this socket.
      const acknowledged = new Promise((resolve) => alpha.emit('held', name, resolve));
      await waitFor(() => gates.has(name), 5_000, 'the held handler');
      const refused = await send(alpha, 'echo');
      expect(refused).toMatchObject({ refused: { status: 429, reason: 'concurrency' } });
      // Still held while the handler runs; another identity has a slot of its own.
      expect(admitted(await send(alpha, 'echo'))).toBe(false);
      expect(admitted(await send(beta, 'echo'))).toBe(true);
      const failed = new Promise((resolve) => alpha.once('exception', resolve));
      gates.get(name)?.(outcome);
      gates.delete(name);
      if (outcome === 'answer') expect(await acknowledged).toEqual({ released: name });
      else
        expect(await failed).toMatchObject({ status: 'error', message: 'Internal server error' });
      await waitFor(async () => admitted(await send(alpha, 'echo')), 5_000, 'a free slot');
    }
  });

  it('never fails a hostile handshake header, and the gateway goes on answering', async () => {
    const url = await start({
      ...STORES.redis(),
      identify: chain(byApiKey({ unknownKey: 'count-unverified' }), byIp()),
      limit: 100,
      window: '1m',
    });
    const long = 'x'.repeat(10_000);
    const hostile: Array<Record<string, string>> = [
      { 'x-api-key': long },
      { authorization: `Bearer ${long}` },
      { 'x-api-key': '{}' },
      { 'x-forwarded-for': 'not-an-ip' },
    ];
    for (const headers of hostile) {
      const socket = await open(url, headers);
      expect(await send(socket, 'echo', 'hostile')).toMatchObject({
        answer: { echoed: 'hostile' },
      });
      socket.close();
    }
  });
});

describe('socket.io gateways on one Redis', () => {
  it('keep the count of an identity that reconnects to another instance', async () => {
    const redis = connect();
    const prefix = uniquePrefix('nest-ws-fleet');
    const options: SentinelModuleOptions = {
      redis,
      prefix,
      timeout: 1_000,
      onError,
      identify: byTenantKey(),
      limit: 2,
      window: '1m',
    };
    const first = await createWsApp({ platform: 'express', options });
    apps.push(first);
    const second = await createWsApp({ platform: 'fastify', options });
    apps.push(second);
    const alpha = { 'x-api-key': 'key-alpha' };
    const onFirst = await open(await first.getUrl(), alpha);
    expect(admitted(await send(onFirst, 'echo'))).toBe(true);
    expect(admitted(await send(onFirst, 'echo'))).toBe(true);
    onFirst.close();
    const onSecond = await open(await second.getUrl(), alpha);
    expect(admitted(await send(onSecond, 'echo'))).toBe(false);
    const keys = await redis.keys(`${prefix}:*`);
    expect(keys.some((key) => key.includes('tenant:alpha'))).toBe(true);
    expect(keys.filter((key) => key.includes('key-alpha'))).toEqual([]);
  });
});
