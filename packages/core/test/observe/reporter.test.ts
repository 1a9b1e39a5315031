// The onError reporter: every error reaches onError, a throwing onError warns, none warns once.
import { describe, expect, it } from 'vitest';
import { createReporter } from '../../src/observe/reporter.ts';
import { SentinelError } from '../../src/shared/errors.ts';
import { recordWarnings } from '../construction-errors.ts';

const warnings = recordWarnings();

describe('createReporter', () => {
  it('hands every error to onError, with its context, and warns about none', async () => {
    const seen: Array<[Error, string]> = [];
    const report = createReporter<[string]>((error, req) => seen.push([error, req]), '@x');
    const failure = new SentinelError('STORE_FAILED', 'boom');
    report(failure, 'a');
    report(failure, 'b');
    await warnings.settled();
    expect(seen).toEqual([
      [failure, 'a'],
      [failure, 'b'],
    ]);
    expect(warnings.list).toEqual([]);
  });

  it('wraps what is not an Error in a plain Error that keeps it as the cause', () => {
    const seen: Error[] = [];
    createReporter((error) => seen.push(error), '@x')('not a number');
    expect(seen[0]).toBeInstanceOf(Error);
    expect(seen[0]).not.toBeInstanceOf(SentinelError);
    expect(seen[0]?.message).toBe('not a number');
    expect(seen[0]?.cause).toBe('not a number');
  });

  it('turns an onError that throws into a warning, every time', async () => {
    const report = createReporter(() => {
      throw new Error('logger down');
    }, '@sentinel/core');
    expect(() => report(new Error('first'))).not.toThrow();
    report(new Error('second'));
    await warnings.settled();
    expect(warnings.list.map((w) => w.message)).toEqual([
      '@sentinel/core: onError threw: logger down',
      '@sentinel/core: onError threw: logger down',
    ]);
  });

  it('without onError, warns once per reporter, labelled', async () => {
    const one = createReporter(undefined, '@sentinel/core');
    const two = createReporter(undefined, '@sentinel/express');
    one(new Error('first'));
    one(new Error('second'));
    two('third');
    await warnings.settled();
    expect(warnings.list.map((w) => [w.name, w.message])).toEqual([
      ['SentinelWarning', '@sentinel/core: first (further errors are silent without onError)'],
      ['SentinelWarning', '@sentinel/express: third (further errors are silent without onError)'],
    ]);
  });
});
