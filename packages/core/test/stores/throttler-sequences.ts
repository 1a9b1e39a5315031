// Random increments for @nestjs/throttler's storage contract, shared by the script-vs-twin and the storage-vs-throttler property tests.
import fc from 'fast-check';

/**
 * Keys keep one configuration each, as the guard's keys (one per route, throttler and tracker)
 * do; two throttlers with their own ttl share each key.
 */
export const CONFIGS: readonly { limit: number; blockDuration: number }[] = [
  { limit: 1, blockDuration: 0 },
  { limit: 3, blockDuration: 0 },
  { limit: 2, blockDuration: 1_500 },
  { limit: 4, blockDuration: 6_000 },
];

/** Each throttler name's ttl, in milliseconds. */
export const TTLS = { a: 1_000, b: 2_500 } as const;

/** One increment: which key, which throttler, and how far the clock moved before it. */
export const increment = fc.record({
  key: fc.nat(CONFIGS.length - 1),
  name: fc.constantFrom('a' as const, 'b' as const),
  // Many hits within a millisecond, most within a ttl, some past every end.
  step: fc.oneof(
    { weight: 3, arbitrary: fc.constant(0) },
    { weight: 4, arbitrary: fc.integer({ min: 1, max: 800 }) },
    { weight: 1, arbitrary: fc.integer({ min: 800, max: 7_000 }) },
  ),
});
