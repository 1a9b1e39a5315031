// Nothing is lost: calls in flight when Redis dies, or made while it is down, are not replayed after it returns.
import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis, type RedisOptions } from 'ioredis';
import { afterEach, expect, it } from 'vitest';
import {
  createRedisClient,
  type HttpLimiterOptions,
  storageIdentity,
} from '../../packages/core/src/index.ts';
import { library, scripts } from '../../packages/core/src/stores/redis/scripts.generated.ts';
import { driver as express } from '../adapters/express.ts';
import { commandCalls } from '../harness/connection-checks.ts';
import type { RedisProcess } from '../harness/redis-server.ts';
import { type FaultApp, faultApp, ownRedis } from './apps.ts';
import { now, startLoad } from './load.ts';

// The settings the README gives for a limiter's own ioredis client.
const README_SETTINGS: RedisOptions = {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 1,
  autoResendUnfulfilledCommands: false,
};

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

/**
 * A TCP gate in front of Redis. While held, it drops what clients send and turns new connections
 * away: calls are then surely in flight, unanswered, when Redis is killed behind it, and the app
 * cannot reconnect until the test has loaded the function library and the scripts into the
 * restarted server (a replayed FCALL or EVALSHA only runs where Redis knows its code). Redis
 * itself is really killed and restarted.
 */
interface Gate {
  url: string;
  hold(): void;
  release(): void;
}

async function gateTo(server: RedisProcess): Promise<Gate> {
  let held = false;
  const sockets = new Set<Socket>();
  const gate: Server = createServer((client) => {
    if (held) return client.destroy();
    const upstream = tcpConnect(server.port, '127.0.0.1');
    client.on('data', (chunk) => {
      if (!held) upstream.write(chunk);
    });
    upstream.pipe(client);
    for (const [socket, peer] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      sockets.add(socket);
      socket.on('error', () => peer.destroy());
      socket.on('close', () => {
        sockets.delete(socket);
        peer.destroy();
      });
    }
  });
  await new Promise<void>((resolve) => gate.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => {
    gate.close();
    for (const socket of sockets) socket.destroy();
  });
  const { port } = gate.address() as { port: number };
  return {
    url: `redis://127.0.0.1:${port}`,
    hold: () => {
      held = true;
    },
    release: () => {
      held = false;
    },
  };
}

function given(client: Redis): Partial<HttpLimiterOptions> {
  client.on('error', () => {});
  cleanups.push(() => client.disconnect());
  return { redisUrl: undefined, redis: client };
}

/** The app's store options for Redis at `url`: a client of its own from redisUrl, or one given. */
const SETUPS: Array<[string, (url: string) => Partial<HttpLimiterOptions>]> = [
  ['the client the limiter builds from redisUrl', (url) => ({ redisUrl: url })],
  ['createRedisClient(url)', (url) => given(createRedisClient(url) as Redis)],
  ["an ioredis client with the README's settings", (url) => given(new Redis(url, README_SETTINGS))],
];

/** The keys the app's limiter has written for `user`. */
async function keysOf(admin: Redis, app: FaultApp, user: string): Promise<string[]> {
  return admin.keys(`${app.prefix}:{${storageIdentity(`x-user:${user}`)}}:*`);
}

/**
 * 20 requests in flight for 'ghost' while the gate swallows the calls (so that some are surely in
 * flight) and Redis is killed and stays down; then Redis restarts with its code loaded before
 * the gate lets the app reconnect, and the app decides through it again. Returns an admin client
 * of the new Redis and the number of requests sent.
 */
async function ghostsThroughAnOutage(server: RedisProcess, gate: Gate, app: FaultApp) {
  const load = startLoad(app.url, {
    concurrency: 20,
    maxMs: 10_000,
    maxRequests: 100_000,
    users: ['ghost'],
  });
  await sleep(300);
  gate.hold();
  await sleep(100);
  await server.stop();
  await sleep(300);
  const samples = await load.stop();
  await server.restart();
  const admin = new Redis(server.url);
  cleanups.push(() => admin.disconnect());
  await admin.call('FUNCTION', 'LOAD', 'REPLACE', library.source);
  for (const script of Object.values(scripts)) await admin.script('LOAD', script.source);
  gate.release();
  const releasedAt = now();
  for (let i = 0; (await app.get(`control-${i}`)).degraded !== undefined; i++) {
    if (now() - releasedAt > 5_000) throw new Error('the app did not reconnect within 5 s');
    await sleep(10);
  }
  // A replay comes with the reconnect; give it time to land.
  await sleep(200);
  return { admin, sent: samples.length };
}

for (const [name, setup] of SETUPS) {
  it(`never replays them with ${name}`, async () => {
    const server = await ownRedis();
    const gate = await gateTo(server);
    const app = await faultApp(express, server, setup(gate.url));
    const { admin, sent } = await ghostsThroughAnOutage(server, gate, app);
    expect(sent).toBeGreaterThan(100);
    expect(await keysOf(admin, app, 'ghost')).toEqual([]);
    // The next call reaches the restarted Redis, as the first of its window.
    expect(await app.get('ghost')).toMatchObject({
      status: 200,
      degraded: undefined,
      remaining: 4,
    });
    expect(await keysOf(admin, app, 'ghost')).toHaveLength(1);
  });
}

// ioredis' defaults re-send the calls in flight at the kill once it reconnects. They reach the
// restarted Redis long after their expiry, so they do nothing there: the same check sees them
// arrive, and sees that nothing was counted.
it("counts nothing of the calls that a client with ioredis' default settings replays", async () => {
  const server = await ownRedis();
  const gate = await gateTo(server);
  const app = await faultApp(express, server, given(new Redis(gate.url)));
  const { admin } = await ghostsThroughAnOutage(server, gate, app);
  const sends = (await commandCalls([admin], 'fcall')) + (await commandCalls([admin], 'evalsha'));
  // The calls in flight at the kill arrived again, besides the control requests.
  expect(sends).toBeGreaterThan(1);
  expect(await keysOf(admin, app, 'ghost')).toEqual([]);
  expect(await app.get('ghost')).toMatchObject({ status: 200, degraded: undefined, remaining: 4 });
});
