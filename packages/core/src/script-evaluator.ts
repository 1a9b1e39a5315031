// Runs a script by SHA, sending its source only when Redis answers NOSCRIPT.
import type { RedisConnection } from './redis-connection.ts';
import type { LuaScript } from './scripts.generated.ts';

/** The two commands the evaluator needs, as every RedisConnection has them. */
export type ScriptClient = Pick<RedisConnection, 'evalsha' | 'eval'>;

export function isNoScriptError(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT');
}

/**
 * EVALSHA, then EVAL on NOSCRIPT and only on NOSCRIPT. Any other error is rethrown: a script
 * that failed halfway is not rolled back, so running it again could count a request twice.
 * `onNoScript` hears of the NOSCRIPT reply first; when it returns false, the caller has given
 * up on the result, so the EVAL is not sent and the NOSCRIPT error stands.
 */
export function evaluateScript(
  client: ScriptClient,
  script: LuaScript,
  keys: readonly string[],
  args: readonly string[],
  onNoScript?: () => boolean,
): Promise<unknown> {
  return client.evalsha(script.sha1, keys, args).catch((error: unknown) => {
    if (!isNoScriptError(error)) throw error;
    if (onNoScript?.() === false) throw error;
    return client.eval(script.source, keys, args);
  });
}
