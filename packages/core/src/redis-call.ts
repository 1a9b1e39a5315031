// One call of the Redis store in flight: its server, its sends, its expiry, and its caller.
import type { SentinelError } from './errors.ts';
import { listeningTime } from './listening-time.ts';
import type { RedisNode } from './redis-node.ts';
import type { ScriptCall } from './script-evaluator.ts';
import type { StoreReply } from './types.ts';

/** The wall-clock backstop of a call, in multiples of `timeout`. */
export const BACKSTOP_TIMEOUTS = 10;

/** A call in flight: its server, when it was made and last sent, and whether anyone still waits. */
export class RedisCall implements ScriptCall {
  readonly calledAt = performance.now();
  /** Its server, known once it is sent: a Cluster's slot table comes with its connection. */
  node: RedisNode | undefined;
  /** performance.now() of the first send; NaN while held for the first connection. */
  firstSentAt = Number.NaN;
  /** performance.now() of the latest send. */
  sentAt = Number.NaN;
  /** listeningTime() then. */
  sentListening = 0;
  /** performance.now() before which the store may not give up on the latest send. */
  mayGiveUpAt = Number.NaN;
  /** The silence, in listening ms, after which the latest send gives up. */
  deadline = Number.NaN;
  settled = false;
  /** The last deadline check found it overdue: the next one fails it if it still is. */
  suspect = false;
  readonly #expires: boolean;
  readonly #timeout: number;
  readonly #resolve: (value: StoreReply) => void;
  readonly #reject: (error: SentinelError) => void;

  constructor(
    expires: boolean,
    timeout: number,
    resolve: (value: StoreReply) => void,
    reject: (error: SentinelError) => void,
  ) {
    this.#expires = expires;
    this.#timeout = timeout;
    this.#resolve = resolve;
    this.#reject = reject;
  }

  get wanted(): boolean {
    return !this.settled;
  }

  sending(): string {
    const node = this.node as RedisNode;
    this.sentAt = performance.now();
    if (Number.isNaN(this.firstSentAt)) this.firstSentAt = this.sentAt;
    this.sentListening = listeningTime();
    this.deadline = node.deadline(this.#timeout);
    this.mayGiveUpAt = this.sentAt;
    if (!this.#expires) return '';
    // Redis does nothing with the call once its clock reads past the deadline after the send,
    // taking the latest reading its clock may have. The store waits as much longer as that
    // reading is uncertain, so Redis has the whole deadline to run the call, and cannot run it
    // after the store has given up.
    this.mayGiveUpAt = this.sentAt + this.deadline + node.clock.uncertainty;
    return String(Math.floor(node.clock.latest(this.sentAt + this.deadline)));
  }

  // Counted from the first send: waiting for the first connection spends none of it.
  mayResend(): boolean {
    return performance.now() - this.firstSentAt < this.#timeout * BACKSTOP_TIMEOUTS;
  }

  resolve(value: StoreReply): void {
    if (this.settled) return;
    this.settled = true;
    this.#resolve(value);
  }

  fail(error: SentinelError): void {
    if (this.settled) return;
    this.settled = true;
    this.#reject(error);
  }
}
