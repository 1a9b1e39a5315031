// Validates policies and tiers once, at construction, into the plans the hot path runs.
import { ALGORITHMS, type Algorithm, type ResolvedPolicy, type TierOptions } from './types.ts';
import { formatWindow, parseWindow } from './window.ts';

/** Everything one consume needs for a tier, computed once. */
export interface Plan {
  readonly tier: string | undefined;
  readonly policies: readonly ResolvedPolicy[];
  /** Appended to the identity's key prefix, one per policy: `:<name>:<algorithm>`. */
  readonly keySuffixes: readonly string[];
  readonly script: 'mixed' | Algorithm;
  readonly args: readonly string[];
}

const NAME = /^[A-Za-z0-9_.-]{1,64}$/;

function fail(option: string, problem: string): never {
  throw new TypeError(`@sentinel/core: \`${option}\` ${problem}`);
}

function resolvePolicy(input: unknown, option: string, tier: string | undefined): ResolvedPolicy {
  if (typeof input !== 'object' || input === null) fail(option, 'must be a policy object');
  const { name, limit, window, algorithm = 'token-bucket' } = input as Record<string, unknown>;
  if (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 1) {
    fail(`${option}.limit`, `must be a positive integer, got ${String(limit)}`);
  }
  const windowMs = parseWindow(window);
  if (windowMs === undefined) {
    fail(
      `${option}.window`,
      `must be positive whole milliseconds or a string like '10s', '1m' or '1h', got ${JSON.stringify(window)}`,
    );
  }
  if (!ALGORITHMS.includes(algorithm as Algorithm)) {
    fail(
      `${option}.algorithm`,
      `must be one of ${ALGORITHMS.join(', ')}, got ${String(algorithm)}`,
    );
  }
  // The scripts keep state in fixed point, limit × window units per window: it must stay exact.
  if (limit * windowMs > Number.MAX_SAFE_INTEGER) {
    fail(`${option}.limit`, 'times the window in milliseconds must not exceed 2^53 - 1');
  }
  const fallback = `${tier ? `${tier.toLowerCase()}-` : ''}${limit}-per-${formatWindow(windowMs)}`;
  const resolvedName = name ?? fallback;
  if (typeof resolvedName !== 'string' || !NAME.test(resolvedName)) {
    fail(`${option}.name`, 'must be 1 to 64 letters, digits, `_`, `-` or `.`');
  }
  return { name: resolvedName, limit, windowMs, algorithm: algorithm as Algorithm };
}

/** Turns one policy or a list of them into a plan; `option` names them in errors. */
export function resolvePlan(input: TierOptions, option: string, tier?: string): Plan {
  const list = Array.isArray(input) ? input : [input];
  if (list.length === 0) fail(option, 'must hold at least one policy');
  const policies = list.map((p, i) =>
    resolvePolicy(p, Array.isArray(input) ? `${option}[${i}]` : option, tier),
  );
  const seen = new Set<string>();
  for (const { name } of policies) {
    if (seen.has(name)) fail(option, `has two policies named '${name}'; give them distinct names`);
    seen.add(name);
  }
  const first = policies[0] as ResolvedPolicy;
  const script = policies.every((p) => p.algorithm === first.algorithm) ? first.algorithm : 'mixed';
  return {
    tier,
    policies,
    keySuffixes: policies.map((p) => `:${p.name}:${p.algorithm}`),
    script,
    args: policies.flatMap((p) => [p.algorithm, String(p.limit), String(p.windowMs)]),
  };
}
