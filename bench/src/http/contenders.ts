// What the HTTP suite loads, per framework: a server variant under one way of keying requests.
// Each contender gets a server process of its own; a limiter's share of the floor is taken
// against the floor keyed the same way.
import { KEY_COUNTS, type Keys } from './load.ts';
import { type Framework, PEERS, type Variant } from './variants.ts';

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

export function contendersOf(framework: Framework): readonly Contender[] {
  return [
    { name: 'bare', label: 'bare', variant: 'bare', keys: 'one', counted: '' },
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
