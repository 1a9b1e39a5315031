// Hands failures to the user's onError, or warns once without one: reporting never throws.

/**
 * A reporter for `onError`. Every error reaches `onError`, each time. Something thrown that is
 * not an Error (a string from a user's `cost`, say) arrives as a plain `Error` whose message
 * is its text and whose `cause` is the value itself: it did not come from the store, so it gets
 * no store code. An `onError` that throws becomes a process warning, because reporting a
 * failure must not turn into a failure of the request it concerns. Without `onError`, the first
 * error becomes one process warning, labelled `label` (such as '@sentinel/core'), and later
 * ones are silent.
 */
export function createReporter<C extends unknown[] = []>(
  onError: ((error: Error, ...context: C) => void) | undefined,
  label: string,
): (error: unknown, ...context: C) => void {
  let warned = false;
  return function report(error: unknown, ...context: C): void {
    const reported = error instanceof Error ? error : new Error(String(error), { cause: error });
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
