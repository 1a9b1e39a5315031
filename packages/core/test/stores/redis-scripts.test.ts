// The compiled-in scripts: current with lua/, known to Redis by the SHA the code expects, integer replies.
import { execFile } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLIENTS, connect, uniquePrefix } from '../../../../test/harness/clients.ts';
import {
  commandCalls as commandCallsOn,
  scriptCalls as scriptCallsOn,
} from '../../../../test/harness/connection-checks.ts';
import {
  clientOf,
  limiterOn,
  ownServer,
  scriptsOnlyUrl,
  userUrl,
} from '../../../../test/harness/own-redis.ts';
import { type RedisProcess, startRedis } from '../../../../test/harness/redis-server.ts';
import { ALGORITHMS, createLimiter, RedisStore, type SentinelError } from '../../src/index.ts';
import { decodeReply, isExpired } from '../../src/stores/redis/reply.ts';
import { library, type ScriptName, scripts } from '../../src/stores/redis/scripts.generated.ts';

const run = promisify(execFile);

/** Unix ms by the Redis clock, the one the scripts report. */
async function redisTimeMs(redis: ReturnType<typeof connect>): Promise<number> {
  const [seconds, micros] = await redis.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}
const generator = new URL('../../scripts/generate-lua.mjs', import.meta.url).pathname;

describe('the generated module', () => {
  it('matches lua/*.lua, so a stale build fails the check', async () => {
    const { stdout } = await run(process.execPath, [generator, '--check']);
    expect(stdout).toContain('match lua/*.lua');
  });

  it.each(Object.keys(scripts) as ScriptName[])(
    'has the SHA that SCRIPT LOAD returns for %s',
    async (name) => {
      const redis = connect();
      expect(await redis.script('LOAD', scripts[name].source)).toBe(scripts[name].sha1);
    },
  );

  it.each(Object.keys(scripts) as ScriptName[])(
    'holds %s in its function library, which answers as the script does',
    async (name) => {
      const redis = connect();
      expect(await redis.call('FUNCTION', 'LOAD', 'REPLACE', library.source)).toBe(library.name);
      await redis.script('LOAD', scripts[name].source);
      const algorithm = name === 'mixed' || name === 'batch' ? 'gcra' : name.replace('batch-', '');
      const now = String(Date.now());
      // Two requests of cost 2 at limit 7, three times: state read, written, read again.
      const args = name.startsWith('batch')
        ? [now, '', '-2', '1', '1', algorithm, '7', '60001', '0', '1', '2', '1']
        : [now, '2', '1', '', algorithm, '7', '60001', '0'];
      const keys = (prefix: string) =>
        name.startsWith('batch') ? [`${prefix}:{a}:p`, `${prefix}:{a}:p`] : [`${prefix}:{a}:p`];
      const [byScript, byFunction] = [uniquePrefix(), uniquePrefix()];
      for (let i = 0; i < 3; i++) {
        const script = (await redis.evalsha(
          scripts[name].sha1,
          keys(byScript).length,
          ...keys(byScript),
          ...args,
        )) as number[];
        const fn = (await redis.fcall(
          scripts[name].function,
          keys(byFunction).length,
          ...keys(byFunction),
          ...args,
        )) as number[];
        // All but the Redis clock, which ends both replies.
        expect(fn.slice(0, -1)).toEqual(script.slice(0, -1));
      }
      // A string, or the sliding log's sorted set.
      const state = async (key: string) =>
        (await redis.type(key)) === 'zset'
          ? redis.zrange(key, '0', '-1', 'WITHSCORES')
          : redis.get(key);
      expect(await state(`${byFunction}:{a}:p`)).toEqual(await state(`${byScript}:{a}:p`));
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
      const call = async (cost: string) =>
        (await redis.evalsha(
          scripts[name].sha1,
          1,
          key,
          ...['', cost, '1', '', policy, '7', '60001', '0'],
        )) as unknown[];
      // Admitted: remaining and reset, then the clock.
      const reply = await call('2');
      expect(reply).toHaveLength(3);
      for (const value of reply) expect(Number.isInteger(value)).toBe(true);
      const clock = reply[2] as number;
      // The codec names the fields: a cost of 2 out of 7 leaves 5.
      const decoded = decodeReply(reply.slice(0, -1) as number[], 1);
      expect(decoded.allowed).toBe(true);
      expect(decoded.policies).toHaveLength(1);
      expect(decoded.policies[0]).toMatchObject({ allowed: true, remaining: 5, retryAfterMs: 0 });
      // Refused: -1 - remaining, reset and retry, then the clock.
      const refused = await call('6');
      expect(refused).toHaveLength(4);
      for (const value of refused) expect(Number.isInteger(value)).toBe(true);
      expect(refused[0]).toBe(-6);
      const decodedRefusal = decodeReply(refused.slice(0, -1) as number[], 1);
      expect(decodedRefusal.allowed).toBe(false);
      expect(decodedRefusal.policies[0]).toMatchObject({ allowed: false, remaining: 5 });
      expect(decodedRefusal.policies[0]?.retryAfterMs).toBeGreaterThan(0);
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
      // The clock alone: taken off, nothing is left.
      expect(late).toHaveLength(1);
      expect(late[0]).toBeGreaterThanOrEqual(now);
      expect(isExpired(late.slice(0, -1))).toBe(true);
      expect(await redis.exists(key)).toBe(0);
      // An expiry still ahead of the clock lets the call run: 6 of 7 left.
      const ran = (await run(now + 60_000)) as number[];
      expect(ran).toHaveLength(3);
      expect(ran[0]).toBe(6);
      expect(isExpired(ran.slice(0, -1))).toBe(false);
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

  /** Calls of `command` on this file's server since its last CONFIG RESETSTAT. */
  const commandCalls = (command: string) =>
    commandCallsOn([connect('ioredis 6', server.url)], command);
  /** Calls that ran Sentinel's code, however sent. */
  const scriptCalls = () => scriptCallsOn([connect('ioredis 6', server.url)]);

  it('runs calls by FCALL once its library is loaded, and recovers from FUNCTION FLUSH', async () => {
    const redis = connect('ioredis 6', server.url);
    const limiter = createLimiter({ redis, limit: 10, window: '1h', prefix: uniquePrefix() });
    // This server is new: the first call's FCALL finds no function, so the call runs as a
    // script while the library loads.
    expect((await limiter.consume('flush')).remaining).toBe(9);
    expect({
      fcall: await commandCalls('fcall'),
      evalsha: await commandCalls('evalsha'),
      eval: await commandCalls('eval'),
      load: await commandCalls('function\\|load'),
    }).toEqual({ fcall: 1, evalsha: 1, eval: 1, load: 1 });
    await redis.config('RESETSTAT');
    expect((await limiter.consume('flush')).remaining).toBe(8);
    expect([await commandCalls('fcall'), await scriptCalls()]).toEqual([1, 1]);
    await redis.function('FLUSH');
    await redis.config('RESETSTAT');
    const after = await limiter.consume('flush');
    expect(after.degraded).toBeUndefined();
    expect(after.remaining).toBe(7);
    // FCALL found no function, so nothing ran: the call went again as a script, counted once,
    // while the library was loaded anew.
    expect({
      fcall: await commandCalls('fcall'),
      evalsha: await commandCalls('evalsha'),
      load: await commandCalls('function\\|load'),
    }).toEqual({ fcall: 1, evalsha: 1, load: 1 });
    expect((await limiter.consume('flush')).remaining).toBe(6);
    expect(await commandCalls('fcall')).toBe(2);
    await limiter.close();
  });

  it.each([
    ['FUNCTION and FCALL', ['-function', '-fcall']],
    ['FCALL alone', ['-fcall']],
  ])('runs as scripts, exactly, for a user whom ACLs deny %s', async (_, denied) => {
    const admin = connect('ioredis 6', server.url);
    const url = await userUrl(admin, server, `denied-${denied.length}`, denied);
    await admin.config('RESETSTAT');
    const redis = connect('ioredis 6', url);
    const errors: SentinelError[] = [];
    const limiter = createLimiter({
      redis,
      limit: 3,
      window: '1h',
      prefix: uniquePrefix(),
      onError: (error) => errors.push(error),
    });
    const decisions = [];
    for (let i = 0; i < 5; i++) decisions.push(await limiter.consume('denied'));
    expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, false, false]);
    expect(errors).toEqual([]);
    // Refused once at most, then never sent again.
    const fcall = /cmdstat_fcall:calls=(\d+),.*rejected_calls=(\d+)/.exec(
      await admin.info('commandstats'),
    );
    expect([Number(fcall?.[1] ?? 0), Number(fcall?.[2] ?? 0)]).toEqual([0, 1]);
    await limiter.close();
  });

  // Where Redis functions are missing (before Redis 7) or denied, calls run as scripts.
  it('recovers from SCRIPT FLUSH with one EVAL, counting the request once', async () => {
    const admin = connect('ioredis 6', server.url);
    const redis = connect('ioredis 6', await scriptsOnlyUrl(admin, server));
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
    expect(await scriptCalls()).toBe(1);
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

describe('the function library', () => {
  it('is not loaded again by a store on a server that has it: its first call goes by FCALL, and one alone tries it', async () => {
    const server = await ownServer();
    const admin = clientOf(server.url);
    // As a server that earlier instances of this version have used.
    await admin.call('FUNCTION', 'LOAD', library.source);
    for (const script of Object.values(scripts)) await admin.script('LOAD', script.source);
    await admin.config('RESETSTAT');
    // A test's clock keeps each call alone, where Redis's would batch a burst into one.
    const { limiter } = limiterOn(clientOf(server.url), { breaker: false, clock: Date.now });
    const calls = (command: string) => commandCallsOn([admin], command);
    // A burst as the store starts: one call tries FCALL, the rest run as scripts meanwhile.
    const decisions = await Promise.all(Array.from({ length: 20 }, () => limiter.consume('burst')));
    expect(decisions.filter((d) => d.allowed)).toHaveLength(10);
    expect(decisions.filter((d) => d.degraded !== undefined)).toHaveLength(0);
    expect([await calls('fcall'), await scriptCallsOn([admin])]).toEqual([1, 20]);
    expect(await calls('function\\|load')).toBe(0);
    // That FCALL ran, so every call from now on goes by FCALL.
    await admin.config('RESETSTAT');
    await Promise.all(Array.from({ length: 5 }, () => limiter.consume('next')));
    expect([await calls('fcall'), await scriptCallsOn([admin])]).toEqual([5, 5]);
  });

  it('is called by a user whom ACLs deny FUNCTION once another has loaded it, and scripts decide until then', async () => {
    const server = await ownServer();
    const admin = clientOf(server.url);
    const url = await userUrl(admin, server, 'no-function', ['-function']);
    const calls = (command: string) => commandCallsOn([admin], command);
    const decide = async () => {
      const { limiter, errors } = limiterOn(clientOf(url), { breaker: false });
      const remaining = [];
      for (let i = 0; i < 3; i++) remaining.push((await limiter.consume('user')).remaining);
      expect(errors).toEqual([]);
      return remaining;
    };
    // No library: the first FCALL finds none, the load is refused, and scripts decide for good.
    expect(await decide()).toEqual([9, 8, 7]);
    expect(await calls('fcall')).toBe(1);
    await admin.call('FUNCTION', 'LOAD', library.source);
    await admin.config('RESETSTAT');
    expect(await decide()).toEqual([9, 8, 7]);
    expect(await calls('fcall')).toBe(3);
  });

  // An FCALL that fails otherwise says nothing of the library, so the next call tries again.
  it('is tried again by the next call after an FCALL that failed for another reason', async () => {
    const server = await ownServer();
    const admin = clientOf(server.url);
    await admin.call('FUNCTION', 'LOAD', library.source);
    const { limiter, errors } = limiterOn(clientOf(server.url), { breaker: false });
    await admin.ping();
    // Past maxmemory, Redis refuses the FCALL of a function that writes, with OOM.
    await admin.config('SET', 'maxmemory', '1');
    await admin.config('RESETSTAT');
    expect((await limiter.consume('a')).degraded).toBe('allow');
    expect(errors.map((error) => error.message)).toEqual([expect.stringContaining('OOM')]);
    await admin.config('SET', 'maxmemory', '0');
    expect((await limiter.consume('a')).remaining).toBe(9);
    expect((await limiter.consume('a')).remaining).toBe(8);
    // Both by FCALL (Redis counts the refused one apart, as rejected), and nothing loaded.
    expect({
      fcall: await commandCallsOn([admin], 'fcall'),
      scripts: await scriptCallsOn([admin]),
      load: await commandCallsOn([admin], 'function\\|load'),
    }).toEqual({ fcall: 2, scripts: 2, load: 0 });
  });

  // Past maxmemory with nothing to evict, Redis refuses FUNCTION LOAD (a write) with OOM, while
  // an FCALL of a function it lacks still answers that the function is missing: a load that
  // fails without Redis refusing functions, which is tried again a second later.
  it('is loaded again a second after a load that Redis answered OOM, with scripts meanwhile', async () => {
    const server = await ownServer();
    const admin = clientOf(server.url);
    const { limiter, errors } = limiterOn(clientOf(server.url), { breaker: false });
    await admin.ping();
    await admin.config('SET', 'maxmemory', '1');
    // The store's first call: its FCALL finds no function, and the load and the script meet OOM.
    expect((await limiter.consume('a')).degraded).toBe('allow');
    expect(errors.map((error) => error.message)).toEqual([expect.stringContaining('OOM')]);
    await admin.config('SET', 'maxmemory', '0');
    await admin.config('RESETSTAT');
    const calls = (command: string) => commandCallsOn([admin], command);
    // Within the second, scripts decide; then a call starts the load again, and the next goes
    // by FCALL.
    expect((await limiter.consume('a')).remaining).toBe(9);
    expect(await calls('function\\|load')).toBe(0);
    await sleep(1_100);
    expect((await limiter.consume('a')).remaining).toBe(8);
    expect(await calls('function\\|load')).toBe(1);
    expect((await limiter.consume('a')).remaining).toBe(7);
    expect(await calls('fcall')).toBe(1);
  });
});
