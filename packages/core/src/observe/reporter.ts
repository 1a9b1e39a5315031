// Hands failures to the user's onError, or to the logger or one process warning without one:
// reporting never throws.
import type { Logger } from './observer.ts';

/**
 * A reporter for `onError`. Every error reaches `onError`, each time. Something thrown that is
 * not an Error (a string from a user's `cost`, say) arrives as a plain `Error` whose message
 * is its text and whose `cause` is the value itself: it did not come from the store, so it gets
 * no store code. An `onError` that throws becomes a process warning, because reporting a
 * failure must not turn into a failure of the request it concerns. Without `onError`, a
 * `logger` gets the first error of each code (store failures excepted: the logger hears of
 * those once per transition from the limiter); without either, the first error becomes one
 * process warning, labelled `label` (such as '@sentinel/core'), and later ones are silent.
 */
export function createReporter<C extends unknown[] = []>(
  onError: ((error: Error, ...context: C) => void) | undefined,
  label: string,
  logger?: Logger,
): (error: unknown, ...context: C) => void {
  let warned = false;
  const logged = new Set<string>();
  return function report(error: unknown, ...context: C): void {
    const reported = error instanceof Error ? error : new Error(String(error), { cause: error });
    if (onError === undefined && logger !== undefined) {
      const code = (reported as { code?: unknown }).code;
      const kind = typeof code === 'string' ? code : 'ERROR';
      if (kind.startsWith('STORE_') || logged.has(kind)) return;
      logged.add(kind);
      try {
        logger.warn(
          { err: reported },
          `${label}: ${reported.message} (further ${kind} errors are not logged without onError)`,
        );
      } catch (thrown) {
        warn(
          `${label}: logger.warn threw: ${thrown instanceof Error ? thrown.message : String(thrown)}`,
        );
      }
      return;
    }
    if (onError === undefined) {
      if (warned) return;
      warned = true;
      warn(`${label}: ${reported.message} (further errors are silent without onError)`);
      return;
    }
    try {
      onError(reported, ...context);
    } catch (thrown) {
      warn(`${label}: onError threw: ${thrown instanceof Error ? thrown.message : String(thrown)}`);
    }
  };
}

function warn(message: string): void {
  process.emitWarning(message, 'SentinelWarning');
}
