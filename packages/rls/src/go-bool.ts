// Booleans as envoyproxy/ratelimit reads its variables: Go's strconv.ParseBool.

const BOOLEANS: Readonly<Record<string, boolean>> = {
  1: true,
  t: true,
  T: true,
  TRUE: true,
  true: true,
  True: true,
  0: false,
  f: false,
  F: false,
  FALSE: false,
  false: false,
  False: false,
};

/** The boolean `value` spells, or undefined when strconv.ParseBool would refuse it. */
export function parseGoBool(value: string): boolean | undefined {
  return Object.hasOwn(BOOLEANS, value) ? BOOLEANS[value] : undefined;
}
