// The options createHttpLimiter adds to createLimiter's: their types, and their checks, run once.
import { LIMITER_OPTION_NAMES, type LimiterOptions } from '../limiter.ts';
import type { Decision } from '../types.ts';
import {
  checkFunction,
  checkObject,
  checkOneOf,
  checkPositiveInteger,
  describe,
  fail,
  rejectUnknownOptions,
} from '../validation.ts';
import { ipMatcher } from './client-ip.ts';
import { type HeaderFormat, resolveHeaderFormats } from './headers.ts';
import { byApiKey, byIp, chain, type Identifier, type RequestLike } from './identity.ts';

export interface HttpLimiterOptions<Req = RequestLike> extends Omit<LimiterOptions, 'onError'> {
  /**
   * Who the request is. Identities without a tier get `defaultTier`.
   * @default chain(byApiKey(), byIp())
   */
  identify?: Identifier<Req>;
  /**
   * Header formats to send; several may be combined with `'legacy'`, or `false` for none.
   * @default 'draft-11'
   */
  headers?: HeaderFormat | readonly HeaderFormat[] | false;
  /** Tokens a request costs, or a function of the request. @default 1 */
  cost?: number | ((req: Req) => number | Promise<number>);
  /**
   * Routes limited with the same group share one budget; without one, limiters with the same
   * policies and prefix share theirs.
   */
  group?: string;
  /** Requests to leave alone. */
  skip?: (req: Req) => boolean | Promise<boolean>;
  /** Client IPs or CIDR ranges never limited. */
  allowList?: readonly string[];
  /** Called for every request over its limit, in shadow mode too. What it throws goes to `onError`. */
  onLimited?: (req: Req, decision: Decision) => void;
  /**
   * Called for every failure: the store, an unknown tier, an `identify`, `cost` or `skip` that
   * threw or returned something invalid, or an `onLimited` that threw, with the request it
   * concerns.
   * @default the first failure as a process warning, or through `logger` if given; later ones silent
   */
  onError?: (error: Error, req: Req) => void;
  /** `'shadow'` evaluates, sets headers and calls back, but never blocks. @default 'enforce' */
  mode?: 'enforce' | 'shadow';
}

/** The options of this layer alone; TypeScript keeps the list complete and exact. */
const HTTP_ONLY = {
  identify: true,
  headers: true,
  cost: true,
  group: true,
  skip: true,
  allowList: true,
  onLimited: true,
  mode: true,
} satisfies Record<Exclude<keyof HttpLimiterOptions, keyof LimiterOptions>, true>;

/** The option names createHttpLimiter takes besides createLimiter's. */
export const HTTP_OPTION_NAMES: readonly string[] = Object.freeze(Object.keys(HTTP_ONLY));

/** Every option createHttpLimiter takes: a typo of any of them is named, with the likely name. */
const KNOWN = new Set([...LIMITER_OPTION_NAMES, ...HTTP_OPTION_NAMES]);

/** The options as a request needs them, checked. */
export interface HttpSettings<Req> {
  identify: Identifier<Req>;
  formats: readonly HeaderFormat[];
  cost: number | ((req: Req) => number | Promise<number>);
  skip: ((req: Req) => boolean | Promise<boolean>) | undefined;
  /** Whether a client IP is on the allow-list; undefined without one. */
  allowed: ((ip: string | undefined) => boolean) | undefined;
  onLimited: ((req: Req, decision: Decision) => void) | undefined;
  onError: ((error: Error, req: Req) => void) | undefined;
  shadow: boolean;
  /** Failures before a decision answer 503, as store failures do. */
  failClosed: boolean;
  /** The limiter's clock, for header times. */
  now: () => number;
  /** The options for createLimiter, with the group in the prefix and without onError. */
  limiterOptions: Omit<LimiterOptions, 'onError'>;
}

const GROUP = /^[A-Za-z0-9_.-]{1,64}$/;
const MODES = ['enforce', 'shadow'] as const;

/** Checks this layer's options once, at construction; createLimiter checks the rest. */
export function resolveHttpOptions<Req extends RequestLike>(
  options: HttpLimiterOptions<Req>,
): HttpSettings<Req> {
  checkObject(options, 'options');
  rejectUnknownOptions(options, KNOWN, '@sentinel/core');
  const {
    identify = chain<Req>(byApiKey(), byIp()),
    headers = 'draft-11',
    cost = 1,
    group,
    skip,
    allowList,
    onLimited,
    onError,
    mode = 'enforce',
    prefix = 'sentinel',
    ...limiterOptions
  } = options;
  checkFunction(identify, 'identify');
  const formats = resolveHeaderFormats(headers);
  if (typeof cost !== 'function') checkPositiveInteger(cost, 'cost');
  if (group !== undefined && (typeof group !== 'string' || !GROUP.test(group))) {
    fail('group', `must be 1 to 64 letters, digits, \`_\`, \`-\` or \`.\`, got ${describe(group)}`);
  }
  if (skip !== undefined) checkFunction(skip, 'skip');
  if (onLimited !== undefined) checkFunction(onLimited, 'onLimited');
  if (onError !== undefined) checkFunction(onError, 'onError');
  checkOneOf(mode, MODES, 'mode');
  const allowed =
    allowList !== undefined && (!Array.isArray(allowList) || allowList.length > 0)
      ? ipMatcher(allowList, 'allowList')
      : undefined;
  const { clock } = limiterOptions;
  return {
    identify,
    formats,
    cost,
    skip,
    allowed,
    onLimited,
    onError,
    shadow: mode === 'shadow',
    failClosed: limiterOptions.onStoreError === 'deny',
    now: () => (typeof clock === 'function' ? clock() : Date.now()),
    limiterOptions: {
      ...limiterOptions,
      prefix: group === undefined ? prefix : `${prefix}:${group}`,
    },
  };
}
