// The options createHttpLimiter adds to createLimiter's: their types, and their checks, run once.
import { LIMITER_OPTION_NAMES, type LimiterOptions } from '../limiter/limiter.ts';
import type { Decision } from '../shared/types.ts';
import {
  checkFunction,
  checkObject,
  checkOneOf,
  checkPositiveInteger,
  describe,
  fail,
  rejectUnknownOptions,
} from '../shared/validation.ts';
import { ipMatcher } from './client-ip.ts';
import { type HeaderFormat, resolveHeaderFormats } from './headers.ts';
import { byIp, type Identifier, type RequestLike } from './identity.ts';
import { resolveShed, type ShedOptions, type ShedSettings } from './shed.ts';

/**
 * The options of an HTTP limiter. `Res` is what `requestWasSuccessful` gets beside the request:
 * Express's `res`, Fastify's `reply`; Koa passes its `ctx` alone.
 */
export interface HttpLimiterOptions<Req = RequestLike, Res = unknown>
  extends Omit<LimiterOptions, 'onError'> {
  /**
   * Who the request is. Identities without a tier get `defaultTier`. The default counts by
   * client IP: a request's own headers name whomever the client likes.
   * @default byIp()
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
   * Called for every failure: the store, an unknown tier, an `identify`, `cost`, `skip` or
   * `requestWasSuccessful` that threw or returned something invalid, an `onLimited` that threw,
   * or a refund that failed, with the request it concerns.
   * @default the first failure as a process warning, or through `logger` if given; later ones silent
   */
  onError?: (error: Error, req: Req) => void;
  /** `'shadow'` evaluates, sets headers and calls back, but never blocks. @default 'enforce' */
  mode?: 'enforce' | 'shadow';
  /**
   * Gives back what an admitted request took once its response shows it succeeded
   * (`requestWasSuccessful`), so that only failures count: for logins. It is counted when it
   * arrives, so a burst cannot pass the limit, and given back after the response is sent.
   * @default false
   */
  skipSuccessfulRequests?: boolean;
  /**
   * Gives back what an admitted request took once its response shows it failed, or once its
   * client left before the response was complete, which counts as a failure.
   * @default false
   */
  skipFailedRequests?: boolean;
  /**
   * Whether a finished response was a success, for the two options above.
   * @default a status below 400
   * @example (req, res) => res.statusCode < 400 || res.statusCode === 404
   */
  requestWasSuccessful?: (req: Req, res: Res) => boolean | Promise<boolean>;
  /**
   * Refusals of one identity, within its longest window, answered 429 before the next ones are
   * answered 403 with a problem body, as @fastify/rate-limit's `ban` does; 0 answers 403 at
   * once. The refusals are counted in the store, so every gateway sharing it agrees.
   * @default none: every refusal is a 429
   * @example 3
   */
  ban?: number;
  /**
   * Fleet-wide load shedding: every request in flight across the instances that share the
   * store, under one identity. Past (1 - reserve) × concurrency in flight, requests that are not
   * `critical` are refused with 503; critical ones are let in up to `concurrency`. Checked
   * before the identity's own policies. See docs/concurrency.md.
   * @example { concurrency: 1000, reserve: 0.2, critical: (req) => req.url === '/health' }
   */
  shed?: ShedOptions<Req>;
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
  skipSuccessfulRequests: true,
  skipFailedRequests: true,
  requestWasSuccessful: true,
  ban: true,
  shed: true,
} satisfies Record<Exclude<keyof HttpLimiterOptions, keyof LimiterOptions>, true>;

/** The option names createHttpLimiter takes besides createLimiter's. */
export const HTTP_OPTION_NAMES: readonly string[] = Object.freeze(Object.keys(HTTP_ONLY));

/** Every option createHttpLimiter takes: a typo of any of them is named, with the likely name. */
const KNOWN = new Set([...LIMITER_OPTION_NAMES, ...HTTP_OPTION_NAMES]);

/** Which responses give back what their request took, and how to tell a success. */
export interface OutcomeSettings<Req, Res> {
  skipSuccessfulRequests: boolean;
  skipFailedRequests: boolean;
  /** Undefined for the default: a status below 400. */
  requestWasSuccessful: ((req: Req, res: Res) => boolean | Promise<boolean>) | undefined;
}

/** The options as a request needs them, checked. */
export interface HttpSettings<Req, Res = unknown> extends OutcomeSettings<Req, Res> {
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
  /** The store's clock, for the times headers state. */
  now: () => number;
  /** Refusals answered 429 before the 403s; undefined without `ban`. */
  ban: number | undefined;
  /** Load shedding; undefined without `shed`. */
  shed: ShedSettings<Req> | undefined;
  /** The options for createLimiter, with the group in the prefix and without onError. */
  limiterOptions: Omit<LimiterOptions, 'onError'>;
}

const GROUP = /^[A-Za-z0-9_.-]{1,64}$/;
const MODES = ['enforce', 'shadow'] as const;

function checkBoolean(value: unknown, option: string): asserts value is boolean {
  if (typeof value !== 'boolean') fail(option, `must be true or false, got ${describe(value)}`);
}

/** A count of refusals: 0 or a positive integer. */
function checkBan(value: unknown): asserts value is number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    fail('ban', `must be a number of refusals, 0 or more, got ${describe(value)}`);
  }
}

/**
 * Checks this layer's options once, at construction; createLimiter checks the rest. One list of
 * options with their defaults, each checked in turn: longer than a screen, and flat.
 */
export function resolveHttpOptions<Req extends RequestLike, Res>(
  options: HttpLimiterOptions<Req, Res>,
): HttpSettings<Req, Res> {
  checkObject(options, 'options');
  rejectUnknownOptions(options, KNOWN, '@sentinel/core');
  const {
    identify = byIp() as Identifier<Req>,
    headers = 'draft-11',
    cost = 1,
    group,
    skip,
    allowList,
    onLimited,
    onError,
    mode = 'enforce',
    skipSuccessfulRequests = false,
    skipFailedRequests = false,
    requestWasSuccessful,
    ban,
    shed,
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
  checkBoolean(skipSuccessfulRequests, 'skipSuccessfulRequests');
  checkBoolean(skipFailedRequests, 'skipFailedRequests');
  if (requestWasSuccessful !== undefined)
    checkFunction(requestWasSuccessful, 'requestWasSuccessful');
  if (ban !== undefined) checkBan(ban);
  const shedding = shed === undefined ? undefined : resolveShed<Req>(shed, prefix);
  const allowed =
    allowList !== undefined && (!Array.isArray(allowList) || allowList.length > 0)
      ? ipMatcher(allowList, 'allowList')
      : undefined;
  // A memory store's clock, for tests; Redis's clock never reaches this process's headers.
  const clock = limiterOptions.store?.clock;
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
    now: clock ?? (() => Date.now()),
    skipSuccessfulRequests,
    skipFailedRequests,
    requestWasSuccessful,
    ban,
    shed: shedding,
    limiterOptions: {
      ...limiterOptions,
      prefix: group === undefined ? prefix : `${prefix}:${group}`,
    },
  };
}
