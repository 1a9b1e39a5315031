// The Redis store: one script call per decision, under a deadline that tells down from busy.
import { SentinelError } from './errors.ts';
import {
  type RedisConnection,
  type SupportedRedisClient,
  toRedisConnection,
} from './redis-connection.ts';
import { evaluateScript } from './script-evaluator.ts';
import { scripts } from './scripts.generated.ts';
import type { Store, StoreReply, StoreRequest } from './types.ts';

/** A client the store can use: ioredis 5 or 6, iovalkey or node-redis 5+, `Redis` or `Cluster`. */
export type RedisClient = SupportedRedisClient;

export interface RedisStoreOptions {
  client: RedisClient;
  /**
   * Milliseconds a call may wait on a Redis that has gone silent. A Redis that keeps answering
   * other calls is busy, not down, and its callers keep waiting for their turn.
   * @default 50
   */
  timeout?: number;
  /**
   * Milliseconds calls may wait for the client's first connection, so that a burst at start-up
   * is counted rather than waved through. Once connected, a lost connection fails calls at once.
   * @default 500
   */
  connectTimeout?: number;
}

interface Pending {
  /** When the command went to the client; NaN while it waits for the first connection. */
  sentAt: number;
  readonly calledAt: number;
  settled: boolean;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: SentinelError) => void;
}

/**
 * Sends one command. `stillWanted` records a sign of life from Redis and says whether the call
 * is still waiting for its result, for commands that need a second round trip.
 */
type Command = (stillWanted: () => boolean) => Promise<unknown>;

function positiveInteger(value: unknown, option: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    throw new TypeError(
      `@sentinel/core: \`${option}\` must be a positive integer of milliseconds, got ${String(value)}`,
    );
  }
  return value;
}

export class RedisStore implements Store {
  readonly #client: RedisConnection;
  readonly #unsubscribe: () => void;
  readonly #timeout: number;
  readonly #connectTimeout: number;
  /** Calls in flight, oldest first; settled ones are dropped from the front as the timer passes. */
  #pending: Pending[] = [];
  /** Sends held until the first connection is ready. */
  #held: Array<(now: number) => void> = [];
  #everReady: boolean;
  #lastReplyAt = 0;
  #timer: NodeJS.Timeout | undefined;
  /** Any reply, an error reply included, proves the server is answering. */
  readonly #replied = (): void => {
    this.#lastReplyAt = Date.now();
  };
  readonly #onReady = (): void => {
    this.#everReady = true;
    this.#replied();
    const held = this.#held;
    this.#held = [];
    const now = Date.now();
    for (const send of held) send(now);
  };

  constructor({ client, timeout = 50, connectTimeout = 500 }: RedisStoreOptions) {
    this.#client = toRedisConnection(client);
    this.#timeout = positiveInteger(timeout, 'timeout');
    this.#connectTimeout = positiveInteger(connectTimeout, 'connectTimeout');
    this.#everReady = this.#client.isReady();
    this.#unsubscribe = this.#client.onReady(this.#onReady);
  }

  evaluate(request: StoreRequest): Promise<StoreReply> {
    const { keys, now, cost, apply, args, script } = request;
    const argv = [now === undefined ? '' : String(now), String(cost), apply ? '1' : '0', ...args];
    return this.#call((stillWanted) =>
      evaluateScript(this.#client, scripts[script], keys, argv, stillWanted),
    ) as Promise<StoreReply>;
  }

  async reset(keys: readonly string[]): Promise<void> {
    await this.#call(() => this.#client.del(keys));
  }

  /** Stops the deadline timer and fails calls still in flight. The client stays open: it is yours. */
  close(): void {
    this.#unsubscribe();
    this.#stopTimer();
    const closed = new SentinelError('STORE_UNAVAILABLE', 'The Redis store was closed');
    for (const pending of this.#pending) this.#fail(pending, closed);
    this.#pending = [];
    this.#held = [];
  }

  #call(command: Command): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const now = Date.now();
      const pending: Pending = {
        sentAt: Number.NaN,
        calledAt: now,
        settled: false,
        resolve,
        reject,
      };
      const client = this.#client;
      if (client.isReady()) {
        this.#send(command, pending, now);
      } else if (!this.#everReady && !client.isClosed()) {
        // Before the first connection: wait for it rather than wave a start-up burst through.
        this.#held.push((readyAt) => this.#send(command, pending, readyAt));
        client.connectIfLazy();
      } else {
        // The connection was up and is lost: failing now beats queueing a command that may be
        // replayed later and consume quota nobody is waiting for.
        const state = client.isClosed() ? 'closed' : 'down';
        reject(new SentinelError('STORE_UNAVAILABLE', `The Redis connection is ${state}`));
        return;
      }
      this.#pending.push(pending);
      if (this.#timer === undefined) {
        this.#timer = setInterval(this.#tick, Math.max(5, Math.floor(this.#timeout / 5)));
        this.#timer.unref();
      }
    });
  }

  #send(command: Command, pending: Pending, now: number): void {
    // A call that already failed its deadline must not reach Redis late and consume quota.
    if (pending.settled) return;
    pending.sentAt = now;
    const stillWanted = (): boolean => {
      this.#replied();
      return !pending.settled;
    };
    command(stillWanted).then(
      (reply) => {
        this.#replied();
        if (pending.settled) return;
        pending.settled = true;
        pending.resolve(reply);
      },
      (error: unknown) => {
        const replied = this.#client.isReplyError(error);
        if (replied) this.#replied();
        const message = error instanceof Error ? error.message : String(error);
        this.#fail(
          pending,
          new SentinelError(replied ? 'STORE_FAILED' : 'STORE_UNAVAILABLE', message, {
            cause: error,
          }),
        );
      },
    );
  }

  #fail(pending: Pending, error: SentinelError): void {
    if (pending.settled) return;
    pending.settled = true;
    pending.reject(error);
  }

  // Deadlines are checked after the event loop has read pending replies, so a process that was
  // busy itself does not blame Redis for replies it had not yet read.
  readonly #tick = (): void => {
    setImmediate(this.#expire);
  };

  readonly #expire = (): void => {
    const now = Date.now();
    const silent = now - this.#lastReplyAt >= this.#timeout;
    const pending = this.#pending;
    let done = 0;
    for (const call of pending) {
      if (call.settled) {
        done++;
        continue;
      }
      if (Number.isNaN(call.sentAt)) {
        if (now - call.calledAt < this.#connectTimeout) break;
        this.#fail(
          call,
          new SentinelError(
            'STORE_UNAVAILABLE',
            `Redis did not connect within connectTimeout (${this.#connectTimeout} ms)`,
          ),
        );
      } else {
        // Calls are in send order, so once one is within its deadline, all later ones are.
        if (!silent || now - call.sentAt < this.#timeout) break;
        this.#fail(
          call,
          new SentinelError('STORE_TIMEOUT', `Redis sent nothing for ${this.#timeout} ms`),
        );
      }
      done++;
    }
    if (done === pending.length) {
      this.#pending = [];
      this.#stopTimer();
    } else if (done > 0) {
      this.#pending = pending.slice(done);
    }
  };

  #stopTimer(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }
}
