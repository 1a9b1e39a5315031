// An onError for suites whose counts are the point: any store error fails the test it happened in.
import { afterEach, expect } from 'vitest';

const unexpected: Error[] = [];

afterEach(() => {
  // onError may not throw into the limiter (a throwing onError only becomes a process warning),
  // so errors are collected here and fail the test once it ends.
  const seen = unexpected.splice(0).map((error) => error.message);
  expect(seen, 'store errors reported to onError').toEqual([]);
});

/** Fails the current test for any error the limiter reports, rather than degrading quietly. */
export function failOnError(error: Error): void {
  unexpected.push(error);
}
