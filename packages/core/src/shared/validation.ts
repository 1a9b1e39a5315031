// Option checks shared by every factory: one message style, each naming the option as written.
import { peerOptionAdvice } from './peer-option-names.ts';

/** Throws the TypeError every misconfiguration gets, naming `option` as the user wrote it. */
export function fail(option: string, problem: string): never {
  throw new TypeError(`@sentinel/core: \`${option}\` ${problem}`);
}

/** A positive safe integer, or a TypeError naming `option`. */
export function checkPositiveInteger(value: unknown, option: string): asserts value is number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    fail(option, `must be a positive integer, got ${describe(value)}`);
  }
}

/** An options object (not null, not an array), or a TypeError naming `option` and what it wants. */
export function checkObject(
  value: unknown,
  option: string,
  expected = 'an object',
): asserts value is object {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    fail(option, `must be ${expected}, got ${describe(value)}`);
  }
}

/** A function, or a TypeError naming `option`. */
export function checkFunction(
  value: unknown,
  option: string,
): asserts value is (...args: never) => unknown {
  if (typeof value !== 'function') fail(option, `must be a function, got ${describe(value)}`);
}

/** One of `allowed`, or a TypeError naming `option` and listing them. */
export function checkOneOf<T extends string>(
  value: unknown,
  allowed: readonly T[],
  option: string,
): asserts value is T {
  if (!allowed.includes(value as T)) {
    fail(
      option,
      `must be one of ${allowed.map((a) => `'${a}'`).join(', ')}, got ${describe(value)}`,
    );
  }
}

/**
 * Throws a TypeError naming every key of `options` that is not in `known`, labelled `where`
 * (such as '@sentinel/express'). A name another rate limiter uses gets what Sentinel calls it;
 * a near miss of a known name gets that name. Keys whose value is undefined count too: a typo
 * is a typo whatever its value.
 * @example rejectUnknownOptions({ onLimted }, ['onLimited'], '@sentinel/core')
 *   // TypeError: @sentinel/core: `onLimted` is not an option: did you mean `onLimited`?
 */
export function rejectUnknownOptions(
  options: object,
  known: ReadonlySet<string> | readonly string[],
  where: string,
): void {
  const problems = unknownOptions(options, known, '');
  if (problems.length > 0) throw new TypeError(`${where}: ${problems.join('; ')}`);
}

/**
 * The same check for an option that is itself an object, such as `breaker`: its keys are named
 * `option.key`, or bare when `option` is '' (fields written at the top level). With `whose`, the
 * message says what kind of object it is and lists the fields it takes.
 * @example rejectUnknownFields({ limit: 1, window: '1s', colour: 1 }, POLICY_FIELDS, 'policies', 'a policy')
 *   // TypeError: @sentinel/core: `policies.colour` is not a field of a policy. A policy takes `name`, `limit`, …
 */
export function rejectUnknownFields(
  value: object,
  known: ReadonlySet<string> | readonly string[],
  option: string,
  whose?: string,
): void {
  const noun = whose === undefined ? 'an option' : `a field of ${whose}`;
  const problems = unknownOptions(value, known, option === '' ? '' : `${option}.`, noun);
  if (problems.length === 0) return;
  const message = problems.join('; ');
  if (whose === undefined) throw new TypeError(`@sentinel/core: ${message}`);
  // After a question, the next sentence needs no full stop of its own.
  const stop = message.endsWith('?') ? ' ' : '. ';
  throw new TypeError(
    `@sentinel/core: ${message}${stop}${capitalized(whose)} takes ${listNames(known)}.`,
  );
}

function capitalized(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/** Names as a message lists them: `a`, `b` and `c`. */
export function listNames(names: Iterable<string>): string {
  const quoted = [...names].map((name) => `\`${name}\``);
  return quoted.length < 2
    ? quoted.join('')
    : `${quoted.slice(0, -1).join(', ')} and ${quoted.at(-1)}`;
}

/** Options Sentinel once took where they are refused now, with where they went. */
const MOVED_OPTIONS: Readonly<Record<string, string>> = {
  clock:
    "belongs to the memory store, for tests: `store: new MemoryStore({ clock })`. A Redis store decides on Redis's clock alone",
};

function unknownOptions(
  options: object,
  known: ReadonlySet<string> | readonly string[],
  parent: string,
  noun = 'an option',
): string[] {
  const names = known instanceof Set ? known : new Set(known as readonly string[]);
  const problems: string[] = [];
  for (const name of Object.keys(options)) {
    if (names.has(name)) continue;
    const moved = parent === '' && Object.hasOwn(MOVED_OPTIONS, name);
    const advice = moved ? MOVED_OPTIONS[name] : peerOptionAdvice(name);
    if (advice !== undefined) {
      problems.push(`\`${parent}${name}\` ${advice}`);
      continue;
    }
    const near = closest(name, names);
    const hint = near === undefined ? '' : `: did you mean \`${parent}${near}\`?`;
    problems.push(`\`${parent}${name}\` is not ${noun}${hint}`);
  }
  return problems;
}

/** The known name nearest to `name`, ignoring case, when it is only a slip away. */
function closest(name: string, known: ReadonlySet<string>): string | undefined {
  let best: string | undefined;
  let bestDistance = Math.min(2, Math.floor(name.length / 3));
  for (const candidate of known) {
    const distance = editDistance(name.toLowerCase(), candidate.toLowerCase());
    if (distance <= bestDistance && (best === undefined || distance < bestDistance)) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

/** Levenshtein distance, with a swap of two neighbours counted as one edit. */
function editDistance(a: string, b: string): number {
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) {
    rows.push([i]);
    for (let j = 1; j <= b.length; j++) {
      if (i === 0) {
        (rows[0] as number[]).push(j);
        continue;
      }
      const row = rows[i] as number[];
      const above = rows[i - 1] as number[];
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(
        (above[j] as number) + 1,
        (row[j - 1] as number) + 1,
        (above[j - 1] as number) + cost,
      );
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        d = Math.min(d, ((rows[i - 2] as number[])[j - 2] as number) + 1);
      }
      row.push(d);
    }
  }
  return (rows[a.length] as number[])[b.length] as number;
}

/** A value as an error message shows it: strings quoted, objects by kind, long ones cut short. */
export function describe(value: unknown): string {
  if (typeof value === 'string') {
    const shown = value.length > 40 ? `${value.slice(0, 40)}…` : value;
    return `'${shown}'`;
  }
  if (typeof value === 'function') return 'a function';
  if (Array.isArray(value)) return 'an array';
  if (value === null) return 'null';
  if (typeof value === 'object') return 'an object';
  return String(value);
}
