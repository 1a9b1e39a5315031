// Runs a script by FCALL or SHA: one load per server on NOSCRIPT, and a resend when Redis ran it
// too late.
import { SentinelError } from '../../shared/errors.ts';
import type { RedisConnection } from './connection.ts';
import { type FunctionLibrary, isNoFunctionError, isRefusal } from './function-library.ts';
import type { RedisNode } from './node.ts';
import { isExpired } from './reply.ts';
import type { LuaScript } from './scripts.generated.ts';
import type { ScriptCall } from './send.ts';

/** The commands the evaluator needs, as every RedisConnection has them. */
export type ScriptClient = Pick<RedisConnection, 'evalsha' | 'eval' | 'fcall' | 'isReplyError'>;

/** The index of the expiry in the script's arguments (ARGV[4] in lua/evaluate.lua). */
export const EXPIRY_ARG = 3;

export function isNoScriptError(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT');
}

/**
 * Sends FCALL while `functions` are usable, EVALSHA otherwise, and sends again only when Redis
 * says the code did not run: a missing function or a refused FCALL (then as EVALSHA), NOSCRIPT,
 * or the expired reply. Any other error is rethrown: a script that failed halfway is not rolled
 * back, so running it again could count a request twice. On NOSCRIPT, one call per server sends
 * the source with EVAL, which loads it; the others wait for that reply and send the SHA again, so
 * a cold burst costs one load, not one EVAL per call. Before every send the call is asked whether
 * it is still wanted: one that gave up sends nothing more. `args[expiryArg]` (by default
 * EXPIRY_ARG) is rewritten for every send. Resolves with the reply, without its trailing server
 * clock, or with undefined once the call is no longer wanted. One loop, past a screen, on
 * purpose: each turn is one send, and every reason to send again sits beside the proof that the
 * code did not run, so that no path can count a request twice.
 */
export async function evaluateScript(
  client: ScriptClient,
  functions: FunctionLibrary,
  node: RedisNode,
  script: LuaScript,
  keys: readonly string[],
  args: string[],
  call: ScriptCall,
  expiryArg = EXPIRY_ARG,
): Promise<number[] | undefined> {
  let via: 'fcall' | 'evalsha' | 'eval' = functions.usable() ? 'fcall' : 'evalsha';
  let waits = 0;
  for (;;) {
    if (!call.wanted) return undefined;
    args[expiryArg] = call.sending();
    let reply: number[];
    try {
      reply = (await (via === 'fcall'
        ? client.fcall(script.function, keys, args)
        : via === 'evalsha'
          ? client.evalsha(script.sha1, keys, args)
          : node.load(script.sha1, () => client.eval(script.source, keys, args)))) as number[];
    } catch (error) {
      if (client.isReplyError(error)) node.heard();
      if (via === 'fcall') {
        // Neither ran the code, so sending the call again cannot count it twice.
        if (isNoFunctionError(error)) functions.missing();
        else if (isRefusal(error, client)) functions.refused();
        else {
          functions.unsure();
          throw error;
        }
        via = 'evalsha';
        continue;
      }
      if (via === 'eval' || !isNoScriptError(error)) throw error;
      // The script did not run, so sending the call again cannot count it twice. A call that
      // meets NOSCRIPT again after a load (SCRIPT FLUSH, a slot that moved) sends the source.
      const loading = node.loading(script.sha1);
      if (loading && waits++ === 0) await loading;
      else via = 'eval';
      continue;
    }
    if (via === 'fcall') functions.ran();
    else if (via === 'eval') via = 'evalsha';
    // A reply read long after its caller gave up says little of the clock or of Redis's pace:
    // liveness only.
    const clock = reply.pop();
    node.heard(clock, call.wanted ? call.sent : undefined);
    if (!isExpired(reply)) {
      call.clock = clock;
      return reply;
    }
    if (!call.mayResend()) {
      throw new SentinelError(
        'STORE_BUSY',
        'Redis is answering, but ran this call only after its deadline, so it did nothing',
      );
    }
  }
}
