// What the HTTP suite loads, per framework: a server variant under one way of keying requests.
// Each contender gets a server process of its own; a limiter's share of the floor is taken
// against the floor keyed the same way, and its share of bare against bare on the same runtime.
import { KEY_COUNTS, type Keys } from './load.ts';
import { type Framework, isNest, PEERS, type Runtime, type Variant } from './variants.ts';

export interface Contender {
  /** Unique within a framework: what the rounds, the rows and the targets call it. */
  readonly name: string;
  readonly label: string;
  readonly variant: Variant;
  readonly keys: Keys;
  /** The keys its limiter counts under, for the table. */
  readonly counted: string;
  /** The floor contender keyed as this one counts; none for bare and the floors. */
  readonly floor?: string;
  /** What runs its server; Node unless it says. */
  readonly runtime?: Runtime;
  /** The bare contender its share of bare is of: `bare` unless it says. */
  readonly bare?: string;
}

const count = (keys: Keys) => KEY_COUNTS[keys].toLocaleString('en-US');

function floor(keys: Keys): Contender {
  return {
    name: `floor-${keys}`,
    label: 'floor: one EVALSHA',
    variant: 'floor',
    keys,
    counted: count(keys),
  };
}

export interface SentinelContender extends Contender {
  /** The name on its bars and targets. */
  readonly short: string;
  readonly floor: string;
}

/** Sentinel's contenders, each a variant under the keying that names its row. */
export const SENTINEL_CONTENDERS: readonly SentinelContender[] = [
  {
    name: 'sentinel',
    short: 'Sentinel',
    label: 'Sentinel, defaults, `redisUrl`',
    variant: 'sentinel',
    keys: 'one',
    counted: '1 (by IP)',
    floor: 'floor-one',
  },
  {
    name: 'sentinel-by-key-one',
    short: 'Sentinel by key, 1 hot key',
    label: 'Sentinel, `identify` by key, `redisUrl`',
    variant: 'sentinel-by-key',
    keys: 'one',
    counted: count('one'),
    floor: 'floor-one',
  },
  {
    name: 'sentinel-by-key-connection',
    short: 'Sentinel by key, 32 keys',
    label: 'Sentinel, `identify` by key, `redisUrl`',
    variant: 'sentinel-by-key',
    keys: 'connection',
    counted: count('connection'),
    floor: 'floor-connection',
  },
  {
    name: 'sentinel-by-key-spread',
    short: 'Sentinel by key, 10k keys',
    label: 'Sentinel, `identify` by key, `redisUrl`',
    variant: 'sentinel-by-key',
    keys: 'spread',
    counted: count('spread'),
    floor: 'floor-spread',
  },
  {
    name: 'sentinel-as-written',
    short: 'Sentinel as users write it',
    label: 'Sentinel as users write it: own ioredis client, `identify` by key',
    variant: 'sentinel-own-client',
    keys: 'one',
    counted: count('one'),
    floor: 'floor-one',
  },
];

const AS_WRITTEN = SENTINEL_CONTENDERS.find(
  (s) => s.name === 'sentinel-as-written',
) as SentinelContender;

const BARE: Contender = { name: 'bare', label: 'bare', variant: 'bare', keys: 'one', counted: '' };

/**
 * The same server on Bun, `bun-` before its name: its share of bare is of bare on Bun, its share
 * of the floor of the floor on Bun.
 */
function onBun<C extends Contender>(contender: C): C {
  return {
    ...contender,
    name: `bun-${contender.name}`,
    runtime: 'bun',
    bare: 'bun-bare',
    ...(contender.floor && { floor: `bun-${contender.floor}` }),
  };
}

/**
 * Hono's contenders: one hot key, as its middleware is written (`app.use(rateLimit({ redis,
 * limit, window, identify }))`), against its peer keyed by the same header; and the same app,
 * bare, at the floor and with Sentinel, on Bun.
 */
const HONO_SENTINELS: readonly SentinelContender[] = [AS_WRITTEN, onBun(AS_WRITTEN)];

function honoContenders(): readonly Contender[] {
  return [
    BARE,
    floor('one'),
    AS_WRITTEN,
    // It has no default key; it counts by the header, as Sentinel's `identify` does.
    ...PEERS.hono.map(
      (peer): Contender => ({
        name: peer,
        label: `${peer}, its RedisStore on ioredis`,
        variant: peer,
        keys: 'one',
        counted: count('one'),
        floor: 'floor-one',
      }),
    ),
    onBun(BARE),
    onBun(floor('one')),
    onBun(AS_WRITTEN),
  ];
}

/**
 * Nest's Sentinel, as its users write it: `SentinelModule.forRoot({ redis, limit, window,
 * identify })` with the app's own ioredis client, `SentinelGuard` as `APP_GUARD`, one hot key.
 */
const NEST_SENTINELS: readonly SentinelContender[] = [
  {
    ...AS_WRITTEN,
    label:
      'Sentinel as users write it: `SentinelModule.forRoot`, own ioredis client, `identify` by key',
  },
];

/**
 * Nest's contenders: bare, the floor in a guard, Sentinel's guard, and @nestjs/throttler's guard
 * on @nest-lab/throttler-storage-redis, keyed by the same header with `getTracker`.
 */
function nestContenders(): readonly Contender[] {
  return [
    BARE,
    floor('one'),
    ...NEST_SENTINELS,
    {
      name: '@nestjs/throttler',
      label:
        '@nestjs/throttler, @nest-lab/throttler-storage-redis, own ioredis client, `getTracker` by key',
      variant: '@nestjs/throttler',
      keys: 'one',
      counted: count('one'),
      floor: 'floor-one',
    },
  ];
}

/** Sentinel's contenders of a framework, whose rows have targets (on Node) or a gate. */
export function sentinelContendersOf(framework: Framework): readonly SentinelContender[] {
  if (isNest(framework)) return NEST_SENTINELS;
  return framework === 'hono' ? HONO_SENTINELS : SENTINEL_CONTENDERS;
}

export function contendersOf(framework: Framework): readonly Contender[] {
  if (framework === 'hono') return honoContenders();
  if (isNest(framework)) return nestContenders();
  return [
    BARE,
    floor('one'),
    floor('connection'),
    floor('spread'),
    ...SENTINEL_CONTENDERS,
    // The peers count by client IP by default: one key, whatever the requests carry.
    ...PEERS[framework].map(
      (peer): Contender => ({
        name: peer,
        label: peer,
        variant: peer,
        keys: 'one',
        counted: '1 (by IP)',
        floor: 'floor-one',
      }),
    ),
  ];
}
