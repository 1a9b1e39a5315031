// Bursts against a healthy Redis must be counted, not degraded: cold start, NOSCRIPT, busy Redis.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis, RedisOptions } from 'ioredis';
import { describe, expect, it } from 'vitest';
import {
  type Algorithm,
  createLimiter,
  type Decision,
  type Limiter,
  type LimiterOptions,
  type SentinelError,
} from '../packages/core/src/index.ts';
import { uniquePrefix } from './harness/clients.ts';
import { clientOf, owned, ownServer } from './harness/own-redis.ts';

function limiterOn(client: Redis, options: Partial<LimiterOptions>) {
  const errors: SentinelError[] = [];
  const limiter = createLimiter({
    redis: client,
    prefix: uniquePrefix('burst'),
    // A day-long window: no refill or window change can blur the exact counts below.
    window: '1d',
    onError: (error) => errors.push(error),
    ...options,
  } as LimiterOptions);
  owned(limiter);
  /** Loads the scripts and proves the store healthy; errors before this do not count. */
  async function warmUp(): Promise<void> {
    for (let i = 0; i < 20; i++) {
      if ((await limiter.consume('warm-up')).degraded === undefined) break;
    }
    errors.length = 0;
  }
  return { limiter, errors, warmUp };
}

function fire(limiter: Limiter, key: string, count: number): Promise<Decision[]> {
  return Promise.all(Array.from({ length: count }, () => limiter.consume(key)));
}

function summary(decisions: Decision[], errors: SentinelError[]) {
  return {
    admitted: decisions.filter((d) => d.allowed && d.degraded === undefined).length,
    degraded: decisions.filter((d) => d.degraded !== undefined).length,
    errors: [...new Set(errors.map((e) => `${e.code}: ${e.message}`))],
  };
}

/** Blocks this process, as a long GC pause or synchronous work would. */
function stall(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // busy
  }
}

const COLD_CLIENTS: Record<string, RedisOptions> = {
  'default client settings': {},
  'enableOfflineQueue: false': { enableOfflineQueue: false },
  // Not even connecting yet: the store must start the connection itself.
  'lazyConnect: true': { lazyConnect: true },
};

describe.each(['token-bucket', 'fixed-window'] as Algorithm[])('%s', (algorithm) => {
  it.each(Object.entries(COLD_CLIENTS))(
    'admits exactly 100 of 1000 calls fired before the first connection, with %s',
    async (_, settings) => {
      const server = await ownServer();
      await clientOf(server.url).script('FLUSH');
      const client = clientOf(server.url, settings);
      expect(client.status).not.toBe('ready');
      const { limiter, errors } = limiterOn(client, { limit: 100, algorithm });

      const decisions = await fire(limiter, 'gateway', 1000);
      expect(summary(decisions, errors)).toEqual({ admitted: 100, degraded: 0, errors: [] });
    },
  );
});

describe('a busy but healthy Redis', () => {
  it('admits exactly 1000 of 5000 concurrent calls over one connection', async () => {
    const server = await ownServer();
    const client = clientOf(server.url);
    const { warmUp, limiter, errors } = limiterOn(client, { limit: 1000 });
    await warmUp();

    const decisions = await fire(limiter, 'busy', 5000);
    expect(summary(decisions, errors)).toEqual({ admitted: 1000, degraded: 0, errors: [] });
  });

  // The store promises not to blame Redis for replies its own busy event loop had not yet read.
  it('keeps waiting for replies its own stalled event loop had not read', async () => {
    const server = await ownServer();
    const client = clientOf(server.url);
    const { warmUp, limiter, errors } = limiterOn(client, { limit: 10, timeout: 50 });
    await warmUp();
    // Let the store's deadline timer go idle, so the stall starts from a clean event loop.
    await sleep(100);
    const burst = await new Promise<Promise<Decision[]>>((resolve) => {
      setTimeout(() => {
        const decisions = fire(limiter, 'stalled', 100);
        stall(120);
        resolve(decisions);
      }, 0);
    });
    expect(summary(await burst, errors)).toEqual({ admitted: 10, degraded: 0, errors: [] });
  });
});
