// SentinelThrottlerStorage against @nestjs/throttler's own ThrottlerStorageService: the same increments, in memory and on Redis, give the same records.
import { setTimeout as sleep } from 'node:timers/promises';
import { type ThrottlerStorage, ThrottlerStorageService } from '@nestjs/throttler';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { connect, uniquePrefix } from '../../../test/harness/clients.ts';
import { failOnError } from '../../../test/harness/store-errors.ts';
import { CONFIGS, increment, TTLS } from '../../core/test/stores/throttler-sequences.ts';
import { SentinelThrottlerStorage } from '../src/index.ts';

interface Increment {
  /** Ms after the sequence starts. */
  at: number;
  key?: string;
  name?: string;
  ttl: number;
  limit: number;
  blockDuration: number;
}

type StorageRecord = Awaited<ReturnType<ThrottlerStorageService['increment']>>;

const closing: Array<{ onApplicationShutdown(): unknown }> = [];
afterEach(async () => {
  await Promise.all(closing.splice(0).map((storage) => storage.onApplicationShutdown()));
});

/**
 * Runs `steps` against @nestjs/throttler's storage and Sentinel's in memory and on Redis, each
 * step's three increments back to back, so that all three see the same moment: the comparison
 * holds however late a step runs. Returns the three sequences of records.
 */
async function race(steps: readonly Increment[]): Promise<StorageRecord[][]> {
  const theirs = new ThrottlerStorageService();
  const memory = new SentinelThrottlerStorage();
  const redis = new SentinelThrottlerStorage({
    redis: connect(),
    prefix: uniquePrefix('throttler-parity'),
    timeout: 2_000,
    onError: failOnError,
  });
  closing.push(theirs, memory, redis);
  // Typed as the interface, so that the type check holds the storage to it.
  const storages: ThrottlerStorage[] = [theirs, memory, redis];
  const records: StorageRecord[][] = [[], [], []];
  const start = performance.now();
  for (const { at, key = 'key', name = 'default', ttl, limit, blockDuration } of steps) {
    await sleep(start + at - performance.now());
    for (const [i, storage] of storages.entries()) {
      records[i]?.push(await storage.increment(key, ttl, limit, blockDuration, name));
    }
  }
  return records;
}

/** Ours answer as theirs: the same hits and blocks, times within the second a ceil can move. */
function expectSameRecords([theirs, ...ours]: StorageRecord[][]): void {
  for (const sequence of ours) {
    expect(sequence.map((r) => [r.totalHits, r.isBlocked])).toEqual(
      (theirs as StorageRecord[]).map((r) => [r.totalHits, r.isBlocked]),
    );
    sequence.forEach((record, i) => {
      const their = (theirs as StorageRecord[])[i] as StorageRecord;
      expect(Math.abs(record.timeToExpire - their.timeToExpire)).toBeLessThanOrEqual(1);
      if (their.isBlocked) {
        expect(Math.abs(record.timeToBlockExpire - their.timeToBlockExpire)).toBeLessThanOrEqual(1);
      } else {
        // Theirs is then a meaningless negative number, which the guard never reads.
        expect(their.timeToBlockExpire).toBeLessThanOrEqual(0);
        expect(record.timeToBlockExpire).toBe(0);
      }
    });
  }
}

describe('SentinelThrottlerStorage, in memory and on Redis, against ThrottlerStorageService', () => {
  it('blocks as it does, counts nothing while blocked, and starts afresh after the block', async () => {
    const hit = { ttl: 1_500, limit: 3, blockDuration: 3_000 };
    const records = await race([
      ...Array.from({ length: 5 }, () => ({ at: 0, ...hit })),
      // The hits stop counting and the window ends at 1.5 s; the block lasts until 3 s.
      { at: 2_000, ...hit },
      { at: 2_250, ...hit },
      { at: 4_000, ...hit },
      { at: 4_000, ...hit },
      { at: 4_100, ...hit },
      { at: 4_100, ...hit },
    ]);
    expectSameRecords(records);
    expect(records[0]?.map((r) => [r.totalHits, r.isBlocked])).toEqual([
      [1, false],
      [2, false],
      [3, false],
      [4, true],
      [4, true],
      [0, true],
      [0, true],
      [1, false],
      [2, false],
      [3, false],
      [4, true],
    ]);
  });

  it('refuses without a block as it does, until the oldest hit stops counting', async () => {
    const hit = { ttl: 1_000, limit: 2, blockDuration: 0 };
    const records = await race([
      { at: 0, ...hit },
      { at: 300, ...hit },
      { at: 500, ...hit },
      // The first hit stopped counting at 1 s, the second stops at 1.3 s.
      { at: 1_150, ...hit },
      { at: 1_200, ...hit },
      { at: 1_650, ...hit },
    ]);
    expectSameRecords(records);
    expect(records[0]?.map((r) => [r.totalHits, r.isBlocked])).toEqual([
      [1, false],
      [2, false],
      [3, true],
      [2, false],
      [3, true],
      [2, false],
    ]);
  });

  it('counts each throttler name apart, with one block per key, as it does', async () => {
    const short = { name: 'short', ttl: 1_000, limit: 1, blockDuration: 2_000 };
    const long = { name: 'long', ttl: 5_000, limit: 3, blockDuration: 5_000 };
    const records = await race([
      { at: 0, ...long },
      { at: 0, ...short },
      { at: 0, ...short },
      { at: 0, ...long },
      { at: 0, key: 'other', ...short },
      { at: 700, ...short },
      // The block ended at 2 s: the long throttler's count starts afresh.
      { at: 2_600, ...long },
      { at: 2_700, ...short },
    ]);
    expectSameRecords(records);
    expect(records[0]?.map((r) => [r.totalHits, r.isBlocked])).toEqual([
      [1, false],
      [1, false],
      [2, true],
      [1, true],
      [1, false],
      [2, true],
      [1, false],
      [1, false],
    ]);
  });
});

describe('SentinelThrottlerStorage in memory, against ThrottlerStorageService on one stepped clock', () => {
  it('give the same record for every increment of random sequences', async () => {
    // Date alone: both storages read Date.now(), and nothing here waits on a timer.
    vi.useFakeTimers({ toFake: ['Date'], now: Date.UTC(2026, 0, 1) + 123 });
    try {
      await fc.assert(
        fc.asyncProperty(fc.array(increment, { minLength: 1, maxLength: 40 }), async (ops) => {
          const theirs = new ThrottlerStorageService();
          const ours = new SentinelThrottlerStorage();
          try {
            for (const { key, name, step } of ops) {
              vi.setSystemTime(Date.now() + step);
              const hit = [
                `k${key}`,
                TTLS[name],
                CONFIGS[key]?.limit,
                CONFIGS[key]?.blockDuration,
                name,
              ] as const;
              const their = await theirs.increment(
                ...(hit as [string, number, number, number, string]),
              );
              const record = await ours.increment(
                ...(hit as [string, number, number, number, string]),
              );
              expect(record).toEqual({
                ...their,
                // Theirs is a meaningless negative number when not blocked, never read.
                timeToBlockExpire: their.isBlocked ? their.timeToBlockExpire : 0,
              });
            }
          } finally {
            theirs.onApplicationShutdown();
            await ours.close();
          }
        }),
        { numRuns: 200 },
      );
    } finally {
      vi.useRealTimers();
    }
  });
});
