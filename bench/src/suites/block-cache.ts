// The opt-in block cache: the Redis calls it saves while one abusive client sends ten times its
// limit, and the admissions it must leave unchanged.
import { setTimeout as sleep } from 'node:timers/promises';
import { createLimiter } from '@sentinel/core';
import { alternate, type BenchConfig, median, type SuiteReport } from '../lib/measure.ts';
import { type BenchRedis, commandStats, SCRIPT_COMMANDS, startRedis } from '../lib/redis-server.ts';

const LIMIT = 50; // per second
const SENT_PER_SECOND = LIMIT * 10;
const GAP_MS = 1000 / SENT_PER_SECOND;

interface Run {
  readonly calls: number;
  readonly requests: number;
  readonly admitted: number;
}

async function abuse(redis: BenchRedis, blockCache: boolean, seconds: number): Promise<Run> {
  const limiter = createLimiter({ redisUrl: redis.url, limit: LIMIT, window: '1s', blockCache });
  try {
    await limiter.consume('warm-up');
    await redis.admin.config('RESETSTAT');
    const key = `abuser-${Math.random()}`;
    let requests = 0;
    let admitted = 0;
    const started = performance.now();
    // Paced, not flat out: the client sends its 10× at a steady rate, as a scraper does, one
    // request every GAP_MS on the schedule, catching up after any delay.
    while (performance.now() < started + seconds * 1000) {
      if ((await limiter.consume(key)).allowed) admitted++;
      requests++;
      const wait = started + requests * GAP_MS - performance.now();
      if (wait > 0) await sleep(wait);
    }
    const stats = await commandStats(redis.admin);
    const calls = SCRIPT_COMMANDS.reduce(
      (sum, command) => sum + (stats.get(command)?.calls ?? 0),
      0,
    );
    return { calls, requests, admitted };
  } finally {
    await limiter.close();
  }
}

export async function blockCache(config: BenchConfig): Promise<SuiteReport> {
  const redis = await startRedis();
  try {
    const seconds = Math.max(config.seconds, config.smoke ? 0.3 : 3);
    const runs = await alternate<Run>(config.rounds, [
      { name: 'off', run: () => abuse(redis, false, seconds) },
      { name: 'on', run: () => abuse(redis, true, seconds) },
    ]);
    const perRequest = (name: string) =>
      median((runs.get(name) ?? []).map((r) => r.calls / r.requests));
    const admittedPerSecond = (name: string) =>
      median((runs.get(name) ?? []).map((r) => r.admitted / seconds));
    const off = perRequest('off');
    const on = perRequest('on');
    const saved = 1 - on / off;
    const admittedOff = admittedPerSecond('off');
    const admittedOn = admittedPerSecond('on');
    const sent = median([...runs.values()].flat().map((r) => r.requests / seconds));
    return {
      title: 'Local block cache',
      method: `One client sends ${SENT_PER_SECOND} requests/s, one every ${GAP_MS} ms, against a token bucket of ${LIMIT}/s on Redis, for ${seconds} s, with \`blockCache\` off (the default) and on. Redis calls are counted by \`INFO commandstats\`. Admissions include the full bucket the client starts with. The client managed ${sent.toFixed(0)} requests/s (median).`,
      columns: ['blockCache', 'Redis calls per request', 'admitted per second'],
      rows: [
        ['off (default)', off.toFixed(3), admittedOff.toFixed(1)],
        ['on', on.toFixed(3), admittedOn.toFixed(1)],
      ],
      ratios: [],
      targets: [
        {
          goal: 'Block cache: Redis calls saved under one client sending 10× its limit (no target figure; admissions unchanged)',
          figure: `${(saved * 100).toFixed(0)}% of calls saved; ${admittedOn.toFixed(1)}/s admitted with it, ${admittedOff.toFixed(1)}/s without`,
          // The cache may only refuse: it must not admit more than the store alone does.
          met: saved > 0 && admittedOn <= admittedOff * 1.01,
        },
      ],
    };
  } finally {
    await redis.stop();
  }
}
