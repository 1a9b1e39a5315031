// What the redis-cost suite sends: each script loaded into the bench's Redis, with the command
// redis-benchmark repeats. Keys carry `__rand_int__`, which redis-benchmark replaces with one of
// LOAD.keys numbers, and a prefix per contender, so no two contenders share (or mistype) a key.
import { ALGORITHMS } from '@sentinel/core';
import { library, scripts } from '@sentinel/core/internal';
import type { Redis } from 'ioredis';
import { RedisStore } from 'rate-limit-redis';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import {
  FLOOR_SCRIPT,
  MINIMAL_TOKEN_BUCKET_SCRIPT,
  REFERENCE_SCRIPT,
  REFERENCE_SCRIPT_WITH_TIME,
} from '../reference-script.ts';

/** `sentinel` runs by FCALL, as Sentinel calls Redis 7; `sentinel-script` by EVALSHA, as before. */
export type ContenderKind =
  | 'sentinel'
  | 'sentinel-script'
  | 'floor'
  | 'reference'
  | 'baseline'
  | 'peer';

export interface ScriptContender {
  readonly name: string;
  readonly kind: ContenderKind;
  /**
   * The command as redis-benchmark takes it: `fcall <function> 1 <key> ...argv`,
   * `evalsha <sha> 1 <key> ...argv`, or a bare one.
   */
  readonly command: readonly string[];
  /** The commandstats entry whose usec_per_call is this contender's Redis CPU per call. */
  readonly stat: string;
}

/**
 * One policy for every limiter here, large enough that no key runs out during the suite: at
 * 100k–500k calls/s over 10k keys a key sees tens of calls a second, so a policy like 100 per
 * minute would turn most calls into rejections, which skip the write and flatter the rate.
 * 10 000 is also sliding-window-log's largest allowed limit.
 */
export const POLICY = { limit: 10_000, windowMs: 60_000 } as const;

const SENTINEL = ALGORITHMS;

const TIME_INCR_SCRIPT = "redis.call('TIME')\nreturn redis.call('INCR', KEYS[1])";
const RETURN_ONE_SCRIPT = 'return 1';

const key = (name: string) => `rc:${name}:__rand_int__`;

/** rate-limiter-flexible's consume script, as the limiter would define it on its client. */
function flexibleScript(): string {
  let lua: string | undefined;
  new RateLimiterRedis({
    storeClient: {
      defineCommand: (_name: string, definition: { lua: string }) => {
        lua = definition.lua;
      },
    },
    points: POLICY.limit,
    duration: POLICY.windowMs / 1000,
  });
  if (!lua) throw new Error('rate-limiter-flexible defined no script');
  return lua;
}

/** rate-limit-redis's increment script, as the store sends it to SCRIPT LOAD. */
async function redisStoreScript(): Promise<string> {
  let lua: string | undefined;
  const store = new RedisStore({
    sendCommand: async (...command: string[]) => {
      lua = command[2];
      return 'sha';
    },
  });
  await store.loadIncrementScript();
  if (!lua) throw new Error('rate-limit-redis loaded no script');
  return lua;
}

interface ScriptSpec {
  readonly name: string;
  readonly kind: ContenderKind;
  /**
   * The Lua; or a function of Sentinel's library; or for a plain command its name, then `argv`
   * follows the key.
   */
  readonly source: string | { readonly function: string } | { readonly command: string };
  /** ARGV; KEYS is always one key. */
  readonly argv: readonly string[];
}

function sentinelArgv(algorithm: string): string[] {
  const { limit, windowMs } = POLICY;
  return ['', '1', '1', '', algorithm, String(limit), String(windowMs), '0'];
}

async function scriptSpecs(): Promise<ScriptSpec[]> {
  const { limit, windowMs } = POLICY;
  // The reference takes the gateway's clock in seconds; redis-benchmark repeats one value, so
  // nothing refills and every call does the full read-and-write path.
  const reference = [String(limit), String(windowMs / 1000)];
  const seconds = String(Math.floor(Date.now() / 1000));
  return [
    // ARGV: now '' (Redis clock), cost 1, mode '1' (consume), no deadline '', then the one
    // policy: algorithm, limit, window and penalty box (0, none), as lua/evaluate.lua reads it.
    ...SENTINEL.map((name) => ({
      name,
      kind: 'sentinel' as const,
      source: { function: scripts[name].function },
      argv: sentinelArgv(name),
    })),
    // What Sentinel sends where Redis has no functions (before 7.0) or ACLs deny them.
    {
      name: 'token-bucket by EVALSHA',
      kind: 'sentinel-script',
      source: scripts['token-bucket'].source,
      argv: sentinelArgv('token-bucket'),
    },
    { name: 'floor', kind: 'floor', source: FLOOR_SCRIPT, argv: [] },
    {
      name: 'minimal token bucket',
      kind: 'baseline',
      source: MINIMAL_TOKEN_BUCKET_SCRIPT,
      argv: [String(limit), String(windowMs)],
    },
    {
      name: 'original design (client time)',
      kind: 'reference',
      source: REFERENCE_SCRIPT,
      argv: [...reference, seconds],
    },
    {
      name: 'original design with TIME',
      kind: 'reference',
      source: REFERENCE_SCRIPT_WITH_TIME,
      argv: reference,
    },
    { name: 'TIME + INCR', kind: 'baseline', source: TIME_INCR_SCRIPT, argv: [] },
    { name: 'return 1', kind: 'baseline', source: RETURN_ONE_SCRIPT, argv: [] },
    // No script: the ceiling any script call sits under.
    { name: 'bare INCR (no script)', kind: 'baseline', source: { command: 'incr' }, argv: [] },
    {
      name: 'rate-limit-redis increment',
      kind: 'peer',
      source: await redisStoreScript(),
      argv: [String(windowMs)],
    },
    // ARGV as RateLimiterRedis sends it: points to consume, duration in s, limit, duration.
    {
      name: 'rate-limiter-flexible consume',
      kind: 'peer',
      source: flexibleScript(),
      argv: ['1', String(windowMs / 1000), String(limit), String(windowMs / 1000)],
    },
  ];
}

/** Loads every script and returns the contenders in the order the table shows them. */
export async function loadContenders(admin: Redis): Promise<ScriptContender[]> {
  const contenders: ScriptContender[] = [];
  await admin.call('FUNCTION', 'LOAD', 'REPLACE', library.source);
  for (const [i, { name, kind, source, argv }] of (await scriptSpecs()).entries()) {
    if (typeof source !== 'string' && 'function' in source) {
      contenders.push({
        name,
        kind,
        command: ['fcall', source.function, '1', key(String(i)), ...argv],
        stat: 'fcall',
      });
      continue;
    }
    if (typeof source !== 'string') {
      contenders.push({
        name,
        kind,
        command: [source.command, key(String(i)), ...argv],
        stat: source.command,
      });
      continue;
    }
    const sha = (await admin.script('LOAD', source)) as string;
    contenders.push({
      name,
      kind,
      command: ['evalsha', sha, '1', key(String(i)), ...argv],
      stat: 'evalsha',
    });
  }
  // One call each before any timing: a script that errors fails here, by name.
  for (const contender of contenders) {
    const [command, ...args] = contender.command.map((arg) => arg.replace('__rand_int__', '0'));
    let reply: unknown;
    try {
      reply = await admin.call(command as string, ...args);
    } catch (error) {
      throw new Error(`${contender.name} fails on Redis: ${(error as Error).message}`);
    }
    // Sentinel's scripts must decide, not return early on arguments they do not read: one
    // policy's admission (what is left and its reset), and the Redis clock.
    if (
      contender.kind.startsWith('sentinel') &&
      !(Array.isArray(reply) && reply.length === 3 && reply[0] >= 0)
    ) {
      throw new Error(`${contender.name} did not decide on Redis: ${JSON.stringify(reply)}`);
    }
  }
  return contenders;
}
