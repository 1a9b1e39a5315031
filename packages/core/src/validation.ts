// Option checks shared by every factory: one message style, each naming the option as written.

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
