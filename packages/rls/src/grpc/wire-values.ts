// The scalars of a response, checked and given their protobuf form once for both encodings (gRPC
// and proto3 JSON): enum numbers, uint32, and google.protobuf's Duration and Timestamp. A value
// that fails a check is a bug in `decide`, so it throws a TypeError naming the field.
import type { Code, LimitUnit } from './messages.ts';

/** `RateLimitResponse.Code`'s numbers. */
export const CODE_NUMBERS: Readonly<Record<Code, number>> = { UNKNOWN: 0, OK: 1, OVER_LIMIT: 2 };

/** `RateLimitResponse.RateLimit.Unit`'s numbers: WEEK came last, so it is 7. */
export const UNIT_NUMBERS: Readonly<Record<LimitUnit, number>> = {
  unknown: 0,
  second: 1,
  minute: 2,
  hour: 3,
  day: 4,
  month: 5,
  year: 6,
  week: 7,
};

const UNIT_BY_NUMBER = new Map(
  Object.entries(UNIT_NUMBERS).map(([unit, number]) => [number, unit as LimitUnit]),
);

/** The unit a number stands for; an open enum may carry numbers no unit has yet. */
export function unitOfNumber(number: number): LimitUnit {
  return UNIT_BY_NUMBER.get(number) ?? 'unknown';
}

export function codeNumber(code: Code, field: string): number {
  const number = Object.hasOwn(CODE_NUMBERS, code) ? CODE_NUMBERS[code] : undefined;
  if (number === undefined) throw new TypeError(`${field}: ${String(code)} is not a Code`);
  return number;
}

export function unitNumber(unit: LimitUnit, field: string): number {
  const number = Object.hasOwn(UNIT_NUMBERS, unit) ? UNIT_NUMBERS[unit] : undefined;
  if (number === undefined) throw new TypeError(`${field}: ${String(unit)} is not a unit`);
  return number;
}

/** A uint32 field's value; undefined is its default, 0. */
export function uint32(value: number | undefined, field: string): number {
  if (value === undefined) return 0;
  if (!Number.isInteger(value) || value < 0 || value > 0xffff_ffff) {
    throw new TypeError(`${field}: ${value} is not a uint32`);
  }
  return value;
}

/** Duration and Timestamp both count whole seconds and the nanoseconds after them. */
export interface SecondsAndNanos {
  readonly seconds: number;
  readonly nanos: number;
}

// The ranges google/protobuf/duration.proto and timestamp.proto allow.
const MAX_DURATION_SECONDS = 315_576_000_000;
const MIN_TIMESTAMP_SECONDS = -62_135_596_800; // 0001-01-01T00:00:00Z
const MAX_TIMESTAMP_SECONDS = 253_402_300_799; // 9999-12-31T23:59:59Z

/** A Duration of `ms` milliseconds: seconds and nanos share its sign, as the spec requires. */
export function durationOf(ms: number, field: string): SecondsAndNanos {
  if (!Number.isFinite(ms) || Math.abs(ms / 1000) > MAX_DURATION_SECONDS) {
    throw new TypeError(`${field}: ${ms} ms is not a Duration`);
  }
  return split(Math.trunc(ms / 1000), ms);
}

/** A Timestamp `ms` milliseconds after the epoch: its nanos count forward, even before 1970. */
export function timestampOf(ms: number, field: string): SecondsAndNanos {
  const seconds = Math.floor(ms / 1000);
  if (!Number.isFinite(ms) || seconds < MIN_TIMESTAMP_SECONDS || seconds > MAX_TIMESTAMP_SECONDS) {
    throw new TypeError(`${field}: ${ms} ms is not a Timestamp`);
  }
  return split(seconds, ms);
}

function split(seconds: number, ms: number): SecondsAndNanos {
  const nanos = Math.round((ms - seconds * 1000) * 1e6);
  // Rounding a fraction of a nanosecond can reach the next whole second.
  if (Math.abs(nanos) === 1e9) return { seconds: seconds + Math.sign(nanos), nanos: 0 };
  return { seconds: seconds || 0, nanos: nanos || 0 };
}

/** proto3 JSON's Duration: "1.500s", "-0.000001s", "3s". */
export function durationJson({ seconds, nanos }: SecondsAndNanos): string {
  const sign = seconds < 0 || nanos < 0 ? '-' : '';
  return `${sign}${Math.abs(seconds)}${fraction(Math.abs(nanos))}s`;
}

/** proto3 JSON's Timestamp: RFC 3339 in UTC, "2026-12-03T15:00:00.250Z". */
export function timestampJson({ seconds, nanos }: SecondsAndNanos): string {
  return `${new Date(seconds * 1000).toISOString().slice(0, 19)}${fraction(nanos)}Z`;
}

/** Nanoseconds as protojson writes them: none, or 3, 6 or 9 digits, as few as hold them. */
function fraction(nanos: number): string {
  if (nanos === 0) return '';
  let digits = String(nanos).padStart(9, '0');
  while (digits.endsWith('000')) digits = digits.slice(0, -3);
  return `.${digits}`;
}
