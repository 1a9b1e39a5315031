// The compiled-in scripts: current with lua/, known to Redis by the SHA the code expects, integer replies.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLIENTS, connect, uniquePrefix } from '../../../test/harness/clients.ts';
import { type RedisProcess, startRedis } from '../../../test/harness/redis-server.ts';
import { ALGORITHMS, createLimiter, RedisStore, type SentinelError } from '../src/index.ts';
import { type ScriptName, scripts } from '../src/scripts.generated.ts';
import { decodeReply, isExpired } from '../src/store-reply.ts';

const run = promisify(execFile);

/** Unix ms by the Redis clock, the one the scripts report. */
async function redisTimeMs(redis: ReturnType<typeof connect>): Promise<number> {
  const [seconds, micros] = await redis.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}
const generator = new URL('../scripts/generate-lua.mjs', import.meta.url).pathname;

describe('the generated module', () => {
  it('matches lua/*.lua, so a stale build fails the check', async () => {
    const { stdout } = await run(process.execPath, [generator, '--check']);
    expect(stdout).toContain('matches');
  });

  it.each(Object.keys(scripts) as ScriptName[])(
    'has the SHA that SCRIPT LOAD returns for %s',
    async (name) => {
      const redis = connect();
      expect(await redis.script('LOAD', scripts[name].source)).toBe(scripts[name].sha1);
    },
  );
});

describe.each(CLIENTS)('replies over %s', (client) => {
  it.each([...ALGORITHMS, 'mixed' as const])(
    'are whole numbers for %s, ending with the Redis clock',
    async (name) => {
      const redis = connect(client);
      const key = `${uniquePrefix()}:{id}:p`;
      const policy = name === 'mixed' ? 'gcra' : name;
      const before = await redisTimeMs(redis);
      const reply = (await redis.evalsha(
        scripts[name].sha1,
        1,
        key,
        ...['', '2', '1', '', policy, '7', '60001', '0'],
      )) as unknown[];
      expect(reply).toHaveLength(6);
      for (const value of reply) expect(Number.isInteger(value)).toBe(true);
      expect(reply[0]).toBe(1);
      const clock = reply[5] as number;
      // The codec names the fields: a cost of 2 out of 7 leaves 5.
      const decoded = decodeReply(reply.slice(0, -1) as number[]);
      expect(decoded.allowed).toBe(true);
      expect(decoded.policies).toHaveLength(1);
      expect(decoded.policies[0]).toMatchObject({ allowed: true, remaining: 5, retryAfterMs: 0 });
      expect(clock).toBeGreaterThanOrEqual(before);
      expect(clock).toBeLessThanOrEqual(await redisTimeMs(redis));
    },
  );

  it.each([...ALGORITHMS, 'mixed' as const])(
    'do nothing for %s once the Redis clock is past the expiry',
    async (name) => {
      const redis = connect(client);
      const key = `${uniquePrefix()}:{id}:p`;
      const policy = name === 'mixed' ? 'gcra' : name;
      const run = (expiry: number) =>
        redis.evalsha(
          scripts[name].sha1,
          1,
          key,
          '',
          '1',
          '1',
          String(expiry),
          policy,
          '7',
          '60001',
          '0',
        );
      const now = await redisTimeMs(redis);
      const late = (await run(now - 1)) as number[];
      expect(late).toHaveLength(2);
      expect(late[0]).toBe(-1);
      expect(isExpired(late)).toBe(true);
      expect(late[1]).toBeGreaterThanOrEqual(now);
      expect(await redis.exists(key)).toBe(0);
      // An expiry still ahead of the clock lets the call run.
      expect(((await run(now + 60_000)) as number[])[0]).toBe(1);
      expect(await redis.exists(key)).toBe(1);
    },
  );
});

describe('the script evaluator', () => {
  let server: RedisProcess;
  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(async () => {
    await server.stop();
  });

  async function commandCalls(command: string): Promise<number> {
    const info = await connect('ioredis 6', server.url).info('commandstats');
    const match = new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(info);
    return match ? Number(match[1]) : 0;
  }

  it('recovers from SCRIPT FLUSH with one EVAL, counting the request once', async () => {
    const redis = connect('ioredis 6', server.url);
    const limiter = createLimiter({ redis, limit: 10, window: '1h', prefix: uniquePrefix() });
    expect((await limiter.consume('flush')).remaining).toBe(9);
    await redis.script('FLUSH');
    await redis.config('RESETSTAT');
    const after = await limiter.consume('flush');
    expect(after.degraded).toBeUndefined();
    expect(after.remaining).toBe(8);
    expect(await commandCalls('evalsha')).toBe(1);
    expect(await commandCalls('eval')).toBe(1);
    // The EVAL loaded the script again, so the next call needs no source.
    expect((await limiter.consume('flush')).remaining).toBe(7);
    expect(await commandCalls('eval')).toBe(1);
    await limiter.close();
  });

  it('never re-runs a script that failed with another error', async () => {
    const redis = connect('ioredis 6', server.url);
    const prefix = uniquePrefix();
    const errors: SentinelError[] = [];
    const limiter = createLimiter({
      redis,
      prefix,
      policies: { name: 'log', limit: 5, window: '1m', algorithm: 'sliding-window-log' },
      onError: (error) => errors.push(error),
    });
    // A string where the log expects a sorted set makes the script fail with WRONGTYPE.
    await redis.set(`${prefix}:{broken}:log:1m:sliding-window-log`, 'not a sorted set');
    await limiter.consume('warm-up-other-key');
    await redis.config('RESETSTAT');
    const decision = await limiter.consume('broken');
    expect(decision.degraded).toBe('allow');
    expect(errors.map((error) => error.code)).toEqual(['STORE_FAILED']);
    expect(errors[0]?.message).toContain('WRONGTYPE');
    expect(await commandCalls('evalsha')).toBe(1);
    expect(await commandCalls('eval')).toBe(0);
    await limiter.close();
  });

  it('works through a store the user builds', async () => {
    const store = new RedisStore({ client: connect('ioredis 5', server.url) });
    const limiter = createLimiter({ store, limit: 1, window: '1h', prefix: uniquePrefix() });
    expect((await limiter.consume('a')).allowed).toBe(true);
    expect((await limiter.consume('a')).allowed).toBe(false);
    await limiter.close();
    store.close();
  });
});
