// Decisions that arrive together share one script call: one batch per server (per slot on a
// Cluster), sent once the event loop has read everything that came in with them.

import { ARGS_PER_POLICY } from '../../shared/lua-constants.generated.ts';
import type { StoreCallInfo, StoreRequest, StoreTrace } from '../../shared/types.ts';
import type { RedisCall } from './call.ts';
import type { RedisConnection } from './connection.ts';
import type { FunctionLibrary } from './function-library.ts';
import type { RedisNode } from './node.ts';
import { answerLength } from './reply.ts';
import { evaluateScript } from './script-evaluator.ts';
import { type LuaScript, scripts } from './scripts.generated.ts';
import type { ScriptCall, Send } from './send.ts';

/** Requests per batch at most: a script blocks Redis while it runs, so a batch stays short. */
export const MAX_BATCH = 64;

/** The index of the expiry in the batch script's arguments (ARGV[2] in lua/batch.lua). */
const BATCH_EXPIRY_ARG = 1;

/** A request of a batch, and what settles it. */
export interface Member {
  readonly call: RedisCall;
  /** The script it would run alone: one algorithm's, or 'mixed'. */
  readonly script: StoreRequest['script'];
  readonly keys: readonly string[];
  /** Its policies' arguments, ARGS_PER_POLICY each, as its plan has them: one per plan, shared. */
  readonly policies: readonly string[];
  /** Its cost and mode, as the script reads them. */
  readonly cost: string;
  readonly mode: string;
  /** Set when its limiter traces store calls. */
  readonly trace: StoreTrace | undefined;
  /**
   * The batch's reply, whose answer to it (as lua/evaluate.lua would give it, without the clock)
   * starts at `start`; undefined when it should go alone: it arrived by itself, or the batch
   * could not run as one (a member gave up, or Redis ran it after its expiry) and the rest are
   * better sent again one by one.
   */
  settle(reply: readonly number[] | undefined, start?: number): void;
  fail(error: unknown): void;
}

/** The batch as the evaluator sees one call: wanted while every member is. */
class BatchCall implements ScriptCall {
  readonly #members: readonly Member[];

  constructor(members: readonly Member[]) {
    this.#members = members;
  }

  get wanted(): boolean {
    return this.#members.every((m) => m.call.wanted);
  }

  /**
   * Marks every member sent, all at one moment: the first member that writes reads the clocks,
   * and so does the first that only looks; the others share the send of their kind. Redis drops
   * the batch after the writers' expiry; a batch that only looks has none.
   */
  sending(): string {
    let writer: RedisCall | undefined;
    let looker: RedisCall | undefined;
    let expiry = '';
    for (const { call } of this.#members) {
      if (call.expires) {
        expiry = call.sendingWith(writer);
        writer ??= call;
      } else {
        call.sendingWith(looker);
        looker ??= call;
      }
    }
    return expiry;
  }

  get sent(): Send | undefined {
    return this.#members[0]?.call.sent;
  }

  mayResend(): boolean {
    return this.#members.every((m) => m.call.mayResend());
  }

  set clock(clock: number | undefined) {
    for (const { call } of this.#members) call.clock = clock;
  }
}

export class RedisBatches {
  readonly #client: RedisConnection;
  readonly #functions: FunctionLibrary;
  /** Open batches by group: a server, or a server's slot on a Cluster. */
  readonly #open = new Map<string, Member[]>();

  constructor(client: RedisConnection, functions: FunctionLibrary) {
    this.#client = client;
    this.#functions = functions;
  }

  /** Adds a request to its group's batch, which settles it: see Member. */
  join(group: string, node: RedisNode, member: Member): void {
    let members = this.#open.get(group);
    if (members === undefined) {
      members = [];
      this.#open.set(group, members);
      // The check phase runs once the loop has read every reply and request waiting, so a
      // batch gathers all that one turn of the loop brought in.
      setImmediate(() => this.#send(group, node, members as Member[]));
    }
    members.push(member);
    if (members.length === MAX_BATCH) this.#send(group, node, members);
  }

  #send(group: string, node: RedisNode, all: Member[]): void {
    if (this.#open.get(group) !== all) return;
    this.#open.delete(group);
    const members = all.filter((m) => m.call.wanted);
    for (const member of all) if (!member.call.wanted) member.settle(undefined);
    if (members.length <= 1) {
      for (const member of members) member.settle(undefined);
      return;
    }
    const { keys, args } = batchArguments(members);
    const script = batchScript(members);
    const send = () =>
      evaluateScript(
        this.#client,
        this.#functions,
        node,
        script,
        keys,
        args,
        new BatchCall(members),
        BATCH_EXPIRY_ARG,
      );
    tracedSend(members, callInfo(this.#functions, script, node, members.length), send).then(
      (reply) => {
        if (reply === undefined) {
          for (const member of members) member.settle(undefined);
          return;
        }
        // Answers differ in length: each member reads its own where the one before it ended.
        let at = 0;
        for (const member of members) {
          const start = at;
          at += answerLength(reply, start, member.policies.length / ARGS_PER_POLICY);
          member.settle(reply, start);
        }
      },
      (error: unknown) => {
        for (const member of members) member.fail(error);
      },
    );
  }
}

/**
 * The keys and arguments of lua/batch.lua for `members`. Each plan's policies go once, and each
 * request names its plan: the client copies and writes every argument, and a batch's requests
 * mostly share a plan or two. Plain loops: flatMap and spreading took 8% of this process's time
 * at 256 in flight.
 */
function batchArguments(members: readonly Member[]): { keys: string[]; args: string[] } {
  const plans = new Map<readonly string[], string>();
  const keys: string[] = [];
  const args = ['', '', String(members.length), ''];
  for (const member of members) {
    for (const key of member.keys) keys.push(key);
    if (!plans.has(member.policies)) {
      plans.set(member.policies, String(plans.size + 1));
      args.push(String(member.policies.length / ARGS_PER_POLICY));
      for (const arg of member.policies) args.push(arg);
    }
  }
  args[3] = String(plans.size);
  // Requests alike, the usual batch, are described once, and their count is negated to say so.
  const first = members[0] as Member;
  if (plans.size === 1 && members.every((m) => m.cost === first.cost && m.mode === first.mode)) {
    args[2] = String(-members.length);
    args.push('1', first.cost, first.mode);
  } else {
    for (const member of members) {
      args.push(plans.get(member.policies) as string, member.cost, member.mode);
    }
  }
  return { keys, args };
}

/**
 * The batch script holding only the one algorithm every member uses, if they share one: a script
 * defines its algorithms on every call. By FCALL, each runs as the library's one batch function.
 */
function batchScript(members: readonly Member[]): LuaScript {
  const { script } = members[0] as Member;
  if (script === 'mixed' || members.some((m) => m.script !== script)) return scripts.batch;
  return scripts[`batch-${script}`];
}

/** A script call as its client span names it. */
export function callInfo(
  functions: FunctionLibrary,
  script: LuaScript,
  node: RedisNode,
  requests: number,
): StoreCallInfo {
  const operation = functions.usable() ? 'FCALL' : 'EVALSHA';
  return { operation, procedure: script.function, server: node.name, requests };
}

/**
 * Sends a batch, inside the client span of the first traced member's tracer, linked to every
 * traced member: limiters that share a store share its calls. Untraced, just sends.
 */
function tracedSend<T>(
  members: readonly Member[],
  call: StoreCallInfo,
  send: () => Promise<T>,
): Promise<T> {
  let tracer: StoreTrace['tracer'] | undefined;
  for (const { trace } of members) tracer ??= trace?.tracer;
  if (tracer === undefined) return send();
  const contexts: unknown[] = [];
  for (const { trace } of members) if (trace !== undefined) contexts.push(trace.context);
  return tracer.span(call, contexts, send);
}
