// The Redis store: a script call per decision, or per batch of decisions that arrive together,
// under a deadline that tells a silent Redis from a busy process.
import calculateSlot from 'cluster-key-slot';
import { SentinelError } from '../../shared/errors.ts';
import { EPOCH_MS } from '../../shared/lua-constants.generated.ts';
import type { Store, StoreReply, StoreRequest } from '../../shared/types.ts';
import {
  checkObject,
  checkPositiveInteger,
  rejectUnknownOptions,
} from '../../shared/validation.ts';
import { callInfo, RedisBatches } from './batch.ts';
import { BACKSTOP_TIMEOUTS, giveUpLead, type LateListener, RedisCall } from './call.ts';
import {
  type RedisConnection,
  type SupportedRedisClient,
  toRedisConnection,
} from './connection.ts';
import { FunctionLibrary } from './function-library.ts';
import { listeningTime } from './listening-time.ts';
import { RedisNode } from './node.ts';
import { decodeReply, withLease } from './reply.ts';
import { scriptClockOf } from './script-clock.ts';
import { evaluateScript } from './script-evaluator.ts';
import { type ScriptName, scripts } from './scripts.generated.ts';

/** A client the store can use: ioredis 5 or 6, iovalkey or node-redis 5+, `Redis` or `Cluster`. */
export type RedisClient = SupportedRedisClient;

export interface RedisStoreOptions {
  /** The connection: ioredis 5 or 6, iovalkey or node-redis 5+, `Redis` or `Cluster`. It stays yours to close. */
  client: RedisClient;
  /**
   * Milliseconds a call may wait while its Redis server sends nothing and this process is free
   * to hear it. The store gives up 2 ms sooner (a fifth sooner, for a timeout under 10 ms), so
   * that a timer waking late still answers within it. Time spent running JavaScript does not
   * count, so a burst that keeps the process busy is not taken for a silent Redis. While the
   * server has lately kept the process waiting long for replies, as on a machine short of CPU,
   * the deadline stretches up to twice this. A backstop of 10 × `timeout` in wall time still
   * gives up on a hung Redis when the process never idles. Redis does nothing with a call that
   * reaches it after its deadline, so a call given up on never consumes quota late; one that Redis
   * ran just before, whose reply came after it, is handed to its request (see StoreRequest.late),
   * and the limiter gives back what it took.
   * @default 50
   */
  timeout?: number;
  /**
   * Milliseconds calls may wait for the client's first connection, so that a burst at start-up
   * is counted rather than waved through. Once that wait has passed without a connection, and
   * once a connection is lost, calls fail at once until the client is connected again.
   * @default 500
   */
  connectTimeout?: number;
}

/** A call whatever it settles with, as the deadline checks see it: they read no reply. */
type AnyCall = RedisCall<never>;

/**
 * Who hears of a script's late reply (see `runScript`): nobody. Its call writes, so Redis must
 * not run it late, but it decides no policy, so there is nothing to give back.
 */
const NO_LATE_LISTENER: LateListener<number[]> = {};

/** What a reset resolves its call with: it decides nothing. */
const NOTHING: StoreReply = { allowed: true, policies: [] };

/**
 * Sends a call to its server: a promise of its reply (undefined when it is answered otherwise),
 * or undefined when the command settles the call itself, as a batch member does.
 */
type Command<Reply = StoreReply> = (
  call: RedisCall<Reply>,
  node: RedisNode,
) => Promise<Reply | undefined> | undefined;

const REDIS_STORE_OPTIONS = {
  client: true,
  timeout: true,
  connectTimeout: true,
} as const satisfies Record<keyof RedisStoreOptions, true>;
const REDIS_STORE_OPTION_NAMES = Object.keys(REDIS_STORE_OPTIONS);

export class RedisStore implements Store {
  readonly #client: RedisConnection;
  readonly #functions: FunctionLibrary;
  readonly #unsubscribe: () => void;
  readonly #timeout: number;
  /** The silence after which a call gives up, unstretched: the timeout less the lead. */
  readonly #firstDue: number;
  readonly #backstop: number;
  readonly #connectTimeout: number;
  /** Each server's liveness and clock: one for a standalone client, one per Cluster master. */
  readonly #nodes = new Map<string, RedisNode>();
  readonly #batches: RedisBatches;
  /** Calls in flight, held ones included; settled ones are dropped as the timer passes. */
  #pending: AnyCall[] = [];
  /** Sends held until the first connection is ready. */
  #held: Array<() => void> = [];
  #everReady: boolean;
  /** The first connection's wait has passed: until it comes up, calls fail at once. */
  #connectWaitOver = false;
  /**
   * Wakes the deadline check when the first call in flight might be overdue, were the process
   * to wait for Redis until then, and at least every #firstDue while calls are in flight: a
   * call gives up as soon as it may, not on the next tick of a periodic timer. It wakes at
   * `#timerAt`, in performance.now() ms.
   */
  #timer: NodeJS.Timeout | undefined;
  #timerAt = Number.POSITIVE_INFINITY;
  /** A deadline check waits in the event loop's check phase. */
  #checkQueued = false;
  readonly #onReady = (): void => {
    this.#everReady = true;
    this.#client.connectServers();
    const held = this.#held;
    this.#held = [];
    for (const send of held) send();
  };

  constructor(options: RedisStoreOptions) {
    checkObject(options, 'options', '{ client, timeout?, connectTimeout? }');
    rejectUnknownOptions(options, REDIS_STORE_OPTION_NAMES, '@sentinel/core');
    const { client, timeout = 50, connectTimeout = 500 } = options;
    checkPositiveInteger(timeout, 'timeout');
    checkPositiveInteger(connectTimeout, 'connectTimeout');
    this.#client = toRedisConnection(client);
    this.#functions = new FunctionLibrary(this.#client);
    this.#batches = new RedisBatches(this.#client, this.#functions);
    this.#timeout = timeout;
    this.#firstDue = timeout - giveUpLead(timeout);
    this.#backstop = timeout * BACKSTOP_TIMEOUTS;
    this.#connectTimeout = connectTimeout;
    this.#everReady = this.#client.isReady();
    if (this.#everReady) this.#client.connectServers();
    this.#unsubscribe = this.#client.onReady(this.#onReady);
  }

  /** Undefined: the scripts read Redis's TIME (but in this repository's tests: script-clock.ts). */
  get clock(): (() => number) | undefined {
    return scriptClockOf(this);
  }

  evaluate(request: StoreRequest): Promise<StoreReply> {
    const { keys, cost, apply, args, script, adjust } = request;
    // A quota lease is taken by the one-request script, whose reply says what it took.
    const quota = apply && adjust === undefined ? request.quota : undefined;
    // A time from the caller is taken only from the clock a test gave this store.
    const now = request.now !== undefined && scriptClockOf(this) ? request.now : undefined;
    // Whatever writes must not count late: consumes, penalties and refunds carry an expiry. Yet
    // Redis may run one just before its expiry and the reply reach this process after the call
    // gave up (a Redis stopped between the two, a reply read late): the request hears of it.
    const writer = apply || adjust !== undefined ? request : undefined;
    const count = request.policies.length;
    const alone = async (call: RedisCall, node: RedisNode): Promise<StoreReply | undefined> => {
      // Built only for a call sent alone. The fourth argument, the expiry, is written by the
      // evaluator at each send.
      const argv = [now === undefined ? '' : String(now), String(cost), mode(request), '', ...args];
      const send = () =>
        evaluateScript(this.#client, this.#functions, node, scripts[script], keys, argv, call);
      const { trace } = request;
      const reply = await (trace === undefined
        ? send()
        : trace.tracer.span(
            callInfo(this.#functions, scripts[script], node, 1),
            [trace.context],
            send,
          ));
      if (reply === undefined) return undefined;
      const decoded = decodeReply(reply, count, now ?? call.clock);
      return quota === undefined ? decoded : withLease(decoded, reply);
    };
    // A joint consume's keys may name several identities: on a Cluster, one script can touch
    // them only when they share a slot, and a batch it joined would fail with it.
    if (this.spansSlots(keys)) {
      return Promise.reject(
        new SentinelError(
          'STORE_FAILED',
          'The keys of one call are in different Cluster hash slots',
        ),
      );
    }
    // A test's clock differs call by call, while a batch runs on one.
    if (now !== undefined || quota !== undefined) return this.#call(keys, writer, alone);
    return this.#call(keys, writer, (call, node) => {
      const group = this.#batchGroup(keys[0] as string);
      if (group === undefined) return alone(call, node);
      this.#joinBatch(group, node, call, request, alone);
      return undefined;
    });
  }

  /**
   * Adds a call to its group's batch, which settles it straight from its reply: no promise per
   * member between them. A batch that could not take it (it went out alone, or was no longer
   * wanted by all but one) leaves it to be sent `alone`.
   */
  #joinBatch(
    group: string,
    node: RedisNode,
    call: RedisCall,
    request: StoreRequest,
    alone: (call: RedisCall, node: RedisNode) => Promise<StoreReply | undefined>,
  ): void {
    const count = request.policies.length;
    this.#batches.join(group, node, {
      call,
      script: request.script,
      keys: request.keys,
      policies: request.args,
      cost: String(request.cost),
      mode: mode(request),
      trace: request.trace,
      settle: (reply, start) => {
        if (reply === undefined) {
          if (call.wanted) this.#settle(call, node, alone(call, node));
          return;
        }
        let decoded: StoreReply;
        try {
          decoded = decodeReply(reply, count, call.clock, start);
        } catch (error) {
          this.#failed(call, node, error);
          return;
        }
        call.resolve(decoded);
      },
      fail: (error) => this.#failed(call, node, error),
    });
  }

  /** Which batch a request joins: its server's, or on a Cluster its slot's; none while unknown. */
  #batchGroup(key: string): string | undefined {
    const server = this.#client.serverOf(key);
    if (server === '') return '';
    return server === '?' ? undefined : `${server} ${calculateSlot(key)}`;
  }

  async reset(keys: readonly string[]): Promise<void> {
    await this.#call(keys, undefined, async (call, node) => {
      call.sending();
      await this.#client.del(keys);
      node.heard();
      return NOTHING;
    });
  }

  /**
   * Runs a script that decides no policy (such as lua/throttler.lua) as a call of this store:
   * under its deadline, and, since it writes, with an expiry after which Redis does nothing with
   * it, which the evaluator writes into `args[expiryArg]`. Resolves with the reply less its
   * trailing Redis clock; rejects with a SentinelError as a decision's call does.
   */
  runScript(
    name: ScriptName,
    keys: readonly string[],
    args: string[],
    expiryArg: number,
  ): Promise<number[]> {
    return this.#call<number[]>(keys, NO_LATE_LISTENER, (call, node) =>
      evaluateScript(
        this.#client,
        this.#functions,
        node,
        scripts[name],
        keys,
        args,
        call,
        expiryArg,
      ),
    );
  }

  /**
   * Whether the keys are on a Cluster and in more than one hash slot, so that no one script call
   * can take them. Keys with one hash tag, as every single identity's, are in one.
   */
  spansSlots(keys: readonly string[]): boolean {
    const first = keys[0];
    // One server first: the usual deployment, which need read no key's hash tag.
    if (first === undefined || keys.length === 1 || this.#client.serverOf(first) === '') {
      return false;
    }
    const tag = hashTag(first);
    if (keys.every((key) => hashTag(key) === tag)) return false;
    const slot = calculateSlot(first);
    return keys.some((key) => calculateSlot(key) !== slot);
  }

  serverOf(keys: readonly string[]): string {
    return this.#client.serverOf(keys[0] ?? '');
  }

  onReady(listener: () => void): () => void {
    return this.#client.onReady(listener);
  }

  /** Stops the deadline timer and fails calls still in flight. The client stays open: it is yours. */
  close(): void {
    this.#unsubscribe();
    this.#stopTimer();
    const closed = new SentinelError('STORE_UNAVAILABLE', 'The Redis store was closed');
    // A closed store sends nothing more, a refund of a late reply included.
    for (const call of this.#pending) {
      call.late = undefined;
      call.fail(closed);
    }
    this.#pending = [];
    this.#held = [];
  }

  #node(key = ''): RedisNode {
    const name = this.#client.serverOf(key);
    let node = this.#nodes.get(name);
    if (node === undefined) {
      node = new RedisNode(name);
      this.#nodes.set(name, node);
    }
    return node;
  }

  /**
   * Makes a call. `writer` is the request of a call that writes: Redis must not run it late, and
   * the request hears of a reply that comes after the call gave up all the same.
   */
  #call<Reply = StoreReply>(
    keys: readonly string[],
    writer: LateListener<Reply> | undefined,
    command: Command<Reply>,
  ): Promise<Reply> {
    return new Promise((resolve, reject) => {
      const call = new RedisCall(writer !== undefined, this.#timeout, resolve, reject, writer);
      const client = this.#client;
      if (client.isReady()) {
        this.#send(call, keys, command);
      } else if (!this.#everReady && !client.isClosed() && !this.#connectWaitOver) {
        // Before the first connection: wait for it rather than wave a start-up burst through.
        this.#held.push(() => this.#send(call, keys, command));
        client.connectIfLazy();
      } else {
        // A lost connection, or a first one that is overdue: failing now beats queueing a call
        // behind a connection that may be long in coming.
        const state = client.isClosed()
          ? 'closed'
          : this.#everReady
            ? 'down'
            : `not connected after connectTimeout (${this.#connectTimeout} ms)`;
        reject(new SentinelError('STORE_UNAVAILABLE', `The Redis connection is ${state}`));
        return;
      }
      this.#pending.push(call);
      // No call can be overdue before its deadline, #firstDue at least, has passed; an armed
      // timer wakes within #firstDue of its arming, so before this call can be due.
      if (this.#timer === undefined) this.#arm(performance.now() + this.#firstDue);
    });
  }

  #send<Reply>(call: RedisCall<Reply>, keys: readonly string[], command: Command<Reply>): void {
    // A call that already failed its deadline must not reach Redis late and consume quota.
    if (call.settled) return;
    const node = this.#node(keys[0]);
    call.node = node;
    const reply = command(call, node);
    if (reply !== undefined) this.#settle(call, node, reply);
  }

  /** Settles a call with the reply a command promised. */
  #settle<Reply>(call: RedisCall<Reply>, node: RedisNode, reply: Promise<Reply | undefined>): void {
    reply.then(
      (value) => {
        if (value !== undefined) call.resolve(value);
      },
      (error: unknown) => this.#failed(call, node, error),
    );
  }

  /** Fails a call whose command failed: a reply error means its server answered. */
  #failed(call: AnyCall, node: RedisNode, error: unknown): void {
    if (error instanceof SentinelError) {
      call.fail(error);
      return;
    }
    const replied = this.#client.isReplyError(error);
    if (replied) node.heard();
    else node.down = true;
    const message = error instanceof Error ? error.message : String(error);
    call.fail(
      new SentinelError(replied ? 'STORE_FAILED' : 'STORE_UNAVAILABLE', message, {
        cause: error,
      }),
    );
  }

  // Deadlines are checked after the event loop has read pending replies, so a process that was
  // busy itself does not blame Redis for replies it had not yet read. One check at a time is
  // queued, so that two checks always have a turn of the loop between them.
  readonly #tick = (): void => {
    if (this.#checkQueued) return;
    this.#checkQueued = true;
    setImmediate(this.#expire);
  };

  /**
   * Drops settled calls and fails overdue ones. A call found overdue fails only when the next
   * check, a turn of the event loop later, finds it overdue still: a check can follow long
   * synchronous work queued before it in the same phase, with replies waiting unread, and an
   * immediate queued now runs only after the loop has read them.
   */
  readonly #expire = (): void => {
    this.#checkQueued = false;
    const now = performance.now();
    const listening = listeningTime();
    const pending = this.#pending;
    // The calls one check fails share an error per deadline. A silent Redis fails every call in
    // flight at once, and an error apiece, each capturing a stack trace, held up the very loop
    // that answers them: 7 to 9 ms per check with 2,048 calls in flight, under 2 ms shared.
    const failures = new Map<number, SentinelError>();
    let kept = 0;
    let suspects = false;
    let due = Number.POSITIVE_INFINITY;
    for (const call of pending) {
      if (call.settled) continue;
      const overdue = this.#overdue(call, now, listening);
      if (overdue && call.suspect) {
        if (call.node === undefined) this.#connectWaitOver = true;
        // Once one call has shown its server silent, the others on it need not prove it again:
        // a process kept busy by the calls the breaker now answers would take long to.
        else call.node.down = true;
        call.fail(this.#failure(call, failures));
        continue;
      }
      call.suspect = overdue;
      suspects ||= overdue;
      if (!overdue) due = Math.min(due, this.#dueAt(call, now, listening));
      pending[kept++] = call;
    }
    pending.length = kept;
    if (suspects) this.#tick();
    else if (kept === 0) this.#stopTimer();
    else this.#arm(Math.min(due, now + this.#firstDue));
  };

  readonly #wake = (): void => {
    this.#timer = undefined;
    this.#timerAt = Number.POSITIVE_INFINITY;
    this.#tick();
  };

  /** Wakes the deadline check at `at` (performance.now() ms), unless it wakes earlier. */
  #arm(at: number): void {
    if (this.#timerAt <= at) return;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timerAt = at;
    // Timers fire on whole milliseconds, never early: one that found nothing due re-arms.
    this.#timer = setTimeout(this.#wake, Math.max(0, Math.ceil(at - performance.now())));
    this.#timer.unref();
  }

  /**
   * The earliest time (performance.now() ms) at which #overdue could fail a call that it does
   * not fail now: when its silence would reach its deadline were the process to do nothing but
   * wait for Redis until then, or its backstop passes, and never before it may give up.
   */
  #dueAt(call: AnyCall, now: number, listening: number): number {
    const { node, sent } = call;
    if (node === undefined || sent === undefined) return call.calledAt + this.#connectTimeout;
    if (node.down || !this.#client.isReady()) return sent.mayGiveUpAt;
    const silence = listening - Math.max(sent.listening, node.heardListening);
    const silentAt = now + Math.max(0, sent.deadline - silence);
    const backstopAt = Math.max(sent.at, node.heardAt) + this.#backstop;
    return Math.max(sent.mayGiveUpAt, Math.min(silentAt, backstopAt));
  }

  /**
   * Whether a call must give up now. Silence is measured from the later of the call's send and
   * its server's last reply, in listening time, so only a server that let this process wait its
   * deadline for nothing is silent: a busy event loop is not. The wall-clock backstop catches a
   * silent server while the process never idles. Either way the call has waited past the expiry
   * it carries, so Redis cannot run it once it has been given up.
   */
  #overdue(call: AnyCall, now: number, listening: number): boolean {
    const { node, sent } = call;
    if (node === undefined || sent === undefined)
      return now - call.calledAt >= this.#connectTimeout;
    if (now < sent.mayGiveUpAt) return false;
    return (
      node.down ||
      !this.#client.isReady() ||
      listening - Math.max(sent.listening, node.heardListening) >= sent.deadline ||
      now - Math.max(sent.at, node.heardAt) >= this.#backstop
    );
  }

  /** What an overdue call fails with: one error per deadline among the calls of one check. */
  #failure(call: AnyCall, failures: Map<number, SentinelError>): SentinelError {
    // A call never sent waited for the first connection; -1 stands for that wait.
    const { node, sent } = call;
    const deadline = node === undefined || sent === undefined ? -1 : Math.round(sent.deadline);
    let failure = failures.get(deadline);
    if (failure === undefined) {
      failure =
        deadline < 0
          ? new SentinelError(
              'STORE_UNAVAILABLE',
              `Redis did not connect within connectTimeout (${this.#connectTimeout} ms)`,
            )
          : new SentinelError(
              'STORE_TIMEOUT',
              `Redis sent nothing for ${deadline} ms while this process waited for it`,
            );
      failures.set(deadline, failure);
    }
    return failure;
  }

  #stopTimer(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#timerAt = Number.POSITIVE_INFINITY;
  }
}

/** A request's mode as `decide` (lua/prelude/decision.lua) reads it. */
/** The scripts' mode letter of each adjustment at a time (see `decide` in lua/prelude/decision.lua). */
const ADJUSTMENT_MODES = { refund: 'r', release: 'x', renew: 'n' } as const;

function mode({ apply, adjust, quota }: StoreRequest): string {
  if (adjust === undefined) {
    if (quota !== undefined && apply) return `l${quota.units}:${quota.ms}:${quota.id}`;
    return apply ? '1' : '0';
  }
  if (adjust.kind === 'penalize') return 'p';
  if (adjust.kind === 'quota') {
    return `q${adjust.at - EPOCH_MS}:${adjust.ends - EPOCH_MS}:${adjust.id}`;
  }
  return `${ADJUSTMENT_MODES[adjust.kind]}${adjust.at - EPOCH_MS}`;
}

/** What Redis hashes a key by: its first non-empty `{...}`, or all of it. */
function hashTag(key: string): string {
  const open = key.indexOf('{');
  const close = open < 0 ? -1 : key.indexOf('}', open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : key;
}
