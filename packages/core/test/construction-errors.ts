// What the option and reporting tests share: the TypeError a construction throws, and warnings.
import { afterEach, beforeEach, expect } from 'vitest';

/** The message of the TypeError `build` throws; fails the test if it throws nothing. */
export function constructionError(build: () => unknown): string {
  try {
    build();
  } catch (error) {
    expect(error).toBeInstanceOf(TypeError);
    return (error as TypeError).message;
  }
  throw new Error('the options were accepted');
}

/**
 * The process warnings emitted during each test of the calling file. They arrive on the next
 * tick after process.emitWarning: await `settled()` before reading them.
 */
export function recordWarnings(): { readonly list: Error[]; settled(): Promise<void> } {
  const list: Error[] = [];
  const listen = (warning: Error) => list.push(warning);
  beforeEach(() => {
    list.length = 0;
    process.on('warning', listen);
  });
  afterEach(() => {
    process.off('warning', listen);
  });
  return { list, settled: () => new Promise((resolve) => setImmediate(resolve)) };
}
