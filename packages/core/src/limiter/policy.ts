// Validates policies and tiers once, at construction, into the plans the hot path runs.
import { MUL_DIV_BOUND, scale } from '../algorithms/fixed-point.ts';
import type { Plan } from '../shared/plan.ts';
import {
  ALGORITHMS,
  type Algorithm,
  type ConcurrencyPolicyOptions,
  type PolicyOptions,
  type ResolvedPolicy,
  type TierOptions,
} from '../shared/types.ts';

import {
  checkObject,
  checkOneOf,
  checkPositiveInteger,
  describe,
  fail,
  rejectUnknownFields,
} from '../shared/validation.ts';
import { formatWindow, parseWindow } from '../shared/window.ts';

const NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/**
 * The most entries a sliding-window-log keeps per identity: one per admitted unit of cost, about
 * 30 bytes each in Redis, so a larger limit is a memory bill rather than a rate limit.
 */
export const MAX_LOG_LIMIT = 10_000;

/** A field of a policy in errors: bare for the top-level shorthand (`option` ''), else dotted. */
const field = (option: string, name: string) => (option === '' ? name : `${option}.${name}`);

/** Every field of PolicyOptions, checked against the interface so that the two cannot drift. */
const FIELDS = {
  name: true,
  limit: true,
  window: true,
  algorithm: true,
  blockFor: true,
} as const satisfies Record<keyof PolicyOptions, true>;

/**
 * What a policy object may hold, and so what the top-level shorthand may: a field added to
 * PolicyOptions is accepted in both. `{ max, windowMs }` gets the peer-name advice.
 */
export const POLICY_FIELDS: readonly (keyof PolicyOptions)[] = Object.freeze(
  Object.keys(FIELDS) as (keyof PolicyOptions)[],
);

/** Every field of ConcurrencyPolicyOptions, checked against the interface likewise. */
const CONCURRENCY_FIELDS = {
  name: true,
  concurrency: true,
  lease: true,
} as const satisfies Record<keyof ConcurrencyPolicyOptions, true>;

export const CONCURRENCY_POLICY_FIELDS: readonly (keyof ConcurrencyPolicyOptions)[] = Object.freeze(
  Object.keys(CONCURRENCY_FIELDS) as (keyof ConcurrencyPolicyOptions)[],
);

/** How long a slot is held at most unless renewed: longer than nearly any request takes. */
export const DEFAULT_LEASE_MS = 60_000;

/** A policy's name, given or made: letters, digits, `_`, `-` and `.`. */
function nameOf(given: unknown, fallback: string, option: string): string {
  const name = given ?? fallback;
  if (typeof name !== 'string' || !NAME.test(name)) {
    fail(field(option, 'name'), 'must be 1 to 64 letters, digits, `_`, `-` or `.`');
  }
  return name;
}

/**
 * A concurrency policy: `concurrency` slots, each held for at most `lease`. The slots are a
 * sorted set in Redis, one entry each, so they are bounded as the sliding window log's are.
 */
function resolveConcurrency(
  input: object,
  option: string,
  tier: string | undefined,
): ResolvedPolicy {
  rejectUnknownFields(input, CONCURRENCY_POLICY_FIELDS, option, 'a concurrency policy');
  const { name, concurrency, lease = DEFAULT_LEASE_MS } = input as Record<string, unknown>;
  checkPositiveInteger(concurrency, field(option, 'concurrency'));
  if (concurrency > MAX_LOG_LIMIT) {
    fail(
      field(option, 'concurrency'),
      `is ${concurrency}, but at most ${MAX_LOG_LIMIT} is allowed`,
    );
  }
  const leaseMs = parseWindow(lease);
  if (leaseMs === undefined) {
    fail(
      field(option, 'lease'),
      `must be positive whole milliseconds or a string like '30s' or '5m', got ${describe(lease)}`,
    );
  }
  const fallback = `${tier ? `${tier.toLowerCase()}-` : ''}${concurrency}-in-flight`;
  return {
    name: nameOf(name, fallback, option),
    limit: concurrency,
    windowMs: leaseMs,
    algorithm: 'concurrency',
    blockForMs: 0,
  };
}

function resolvePolicy(input: unknown, option: string, tier: string | undefined): ResolvedPolicy {
  checkObject(input, option || 'policies', 'a policy object');
  if ('concurrency' in input || 'lease' in input) return resolveConcurrency(input, option, tier);
  rejectUnknownFields(input, POLICY_FIELDS, option, 'a policy');
  const {
    name,
    limit,
    window,
    algorithm = 'token-bucket',
    blockFor,
  } = input as Record<string, unknown>;
  checkPositiveInteger(limit, field(option, 'limit'));
  const windowMs = parseWindow(window);
  if (windowMs === undefined) {
    fail(
      field(option, 'window'),
      `must be positive whole milliseconds or a string like '10s', '1m' or '1h', got ${describe(window)}`,
    );
  }
  checkOneOf(algorithm, ALGORITHMS, field(option, 'algorithm'));
  checkScale(limit, windowMs, algorithm, option);
  const fallback = `${tier ? `${tier.toLowerCase()}-` : ''}${limit}-per-${formatWindow(windowMs)}`;
  const resolvedName = nameOf(name, fallback, option);
  let blockForMs = 0;
  if (blockFor !== undefined) {
    const parsed = parseWindow(blockFor);
    if (parsed === undefined) {
      fail(
        field(option, 'blockFor'),
        `must be positive whole milliseconds or a string like '30s' or '15m', got ${describe(blockFor)}`,
      );
    }
    blockForMs = parsed;
  }
  return { name: resolvedName, limit, windowMs, algorithm, blockForMs };
}

/**
 * Where a policy's state lives. A name given by the caller stays when its limit changes, and so
 * does the state, which each algorithm reads rightly under a new limit; a new window changes
 * what the state means (a window index, the units of a token), so it gets a key of its own and
 * starts afresh, as does a rate policy whose fixed-point units depend on its limit (over 2^53 of
 * them). A default name already spells out the limit and the window.
 */
function keySuffix({ name, limit, windowMs, algorithm }: ResolvedPolicy, named: boolean): string {
  if (!named) return `:${name}:${algorithm}`;
  const units = { token: 0, rate: 0, stepMs: 1 };
  const rated = algorithm === 'token-bucket' || algorithm === 'gcra';
  const limitBound = rated && scale(limit, windowMs, units) && units.token !== windowMs;
  const shape = limitBound ? `${limit}-per-${formatWindow(windowMs)}` : formatWindow(windowMs);
  return `:${name}:${shape}:${algorithm}`;
}

/** Each algorithm's bound on a policy's size, so that its integers stay exact in Lua's doubles. */
function checkScale(limit: number, windowMs: number, algorithm: Algorithm, option: string): void {
  const limitOption = field(option, 'limit');
  switch (algorithm) {
    case 'fixed-window':
      return;
    case 'sliding-window-log':
      if (limit > MAX_LOG_LIMIT) {
        fail(
          limitOption,
          `is ${limit}, but sliding-window-log keeps one entry per request and allows at most ${MAX_LOG_LIMIT}; use 'sliding-window-counter' for large limits`,
        );
      }
      return;
    case 'sliding-window-counter':
      // Its weighting is exact for operands below 2^44 (1.7 × 10^13; 557 years of ms).
      if (limit >= MUL_DIV_BOUND) fail(limitOption, `must be below 2^44 with ${algorithm}`);
      if (windowMs >= MUL_DIV_BOUND)
        fail(field(option, 'window'), `must be below 2^44 ms with ${algorithm}`);
      return;
    default:
      if (!scale(limit, windowMs, { token: 0, rate: 0, stepMs: 1 })) {
        fail(
          limitOption,
          `of ${limit} per ${windowMs} ms needs more than 2^53 fixed-point units with ${algorithm}, even counting time in steps of up to a minute; a window of whole minutes or a rounder limit fits, or use 'fixed-window'`,
        );
      }
  }
}

/**
 * Turns one policy or a list of them into a plan. `option` names them in errors; '' names their
 * fields bare, for the shorthand whose fields are top-level options.
 */
export function resolvePlan(
  input: TierOptions,
  option: string,
  tier?: string,
  /** A joint consume's policies count for different identities, whose keys never meet. */
  sameNames = false,
): Plan {
  const list = Array.isArray(input) ? input : [input];
  if (list.length === 0) fail(option || 'policies', 'must hold at least one policy');
  // The shorthand's fields stay bare even when they make two policies, as they were written.
  const policies = list.map((p, i) =>
    resolvePolicy(p, Array.isArray(input) && option !== '' ? `${option}[${i}]` : option, tier),
  );
  const named = list.map(
    (p) => typeof p === 'object' && p !== null && 'name' in p && p.name !== undefined,
  );
  const seen = new Set<string>();
  for (const { name } of policies) {
    if (seen.has(name) && !sameNames)
      fail(option || 'policies', `has two policies named '${name}'; give them distinct names`);
    seen.add(name);
  }
  return {
    tier,
    policies,
    keySuffixes: [
      ...policies.map((p, i) => keySuffix(p, named[i] as boolean)),
      ...policies.flatMap((p, i) =>
        p.blockForMs > 0 ? [`${keySuffix(p, named[i] as boolean)}:box`] : [],
      ),
    ],
    script: scriptOf(policies),
    lease: leaseOf(policies),
    // ARGS_PER_POLICY of them per policy.
    args: policies.flatMap((p) => [
      p.algorithm,
      String(p.limit),
      String(p.windowMs),
      String(p.blockForMs),
    ]),
  };
}

/** The script that runs the policies: their one algorithm's, or the one that mixes them. */
function scriptOf(policies: readonly ResolvedPolicy[]): Plan['script'] {
  const first = policies[0] as ResolvedPolicy;
  return policies.every((p) => p.algorithm === first.algorithm) ? first.algorithm : 'mixed';
}

/** What an admitted consume of the policies holds: the concurrency policies' slots, if any. */
function leaseOf(policies: readonly ResolvedPolicy[]): Plan['lease'] {
  const holders = policies.filter((p) => p.algorithm === 'concurrency');
  if (holders.length === 0) return undefined;
  return Object.freeze({
    policies: Object.freeze(holders.map((p) => p.name)),
    ms: Math.min(...holders.map((p) => p.windowMs)),
    slots: 1,
  });
}

/**
 * The plan of one script call that runs `first`'s policies and then `second`'s, each under keys
 * of its own limiter's (see StoreCalls.decideBeside): the policies' keys in that order, then
 * their boxes' in the same order, under `second`'s tier.
 */
export function joinPlans(first: Plan, second: Plan): Plan {
  const policies = [...first.policies, ...second.policies];
  const boxes = (plan: Plan) => plan.keySuffixes.slice(plan.policies.length);
  return {
    tier: second.tier,
    policies,
    keySuffixes: [
      ...first.keySuffixes.slice(0, first.policies.length),
      ...second.keySuffixes.slice(0, second.policies.length),
      ...boxes(first),
      ...boxes(second),
    ],
    script: scriptOf(policies),
    lease: leaseOf(policies),
    args: [...first.args, ...second.args],
  };
}
