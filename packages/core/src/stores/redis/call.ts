// One call of the Redis store in flight: its server, its sends, its expiry, and its caller.
import type { SentinelError } from '../../shared/errors.ts';
import type { StoreReply } from '../../shared/types.ts';
import { listeningTime } from './listening-time.ts';
import type { RedisNode } from './node.ts';
import type { ScriptCall, Send } from './send.ts';

/** The wall-clock backstop of a call, in multiples of `timeout`. */
export const BACKSTOP_TIMEOUTS = 10;

/**
 * How much before its deadline a call plans to give up: a timer wakes up to a millisecond late
 * and the silence is confirmed a turn of the event loop later, so a call planned for the
 * deadline itself is answered a millisecond or two past it. 2 ms, or a fifth of a short timeout.
 */
export function giveUpLead(timeout: number): number {
  return Math.min(2, timeout / 5);
}

/** Who hears of a reply that came after the call failed: a StoreRequest's `late`. */
export interface LateListener<Reply> {
  late?(reply: Reply): void;
}

/**
 * A call in flight: its server, when it was made and last sent, and whether anyone still waits.
 * `Reply` is what it settles with: a decision's StoreReply, or a script's own (see `runScript`).
 */
export class RedisCall<Reply = StoreReply> implements ScriptCall {
  readonly calledAt = performance.now();
  /** Its server, known once it is sent: a Cluster's slot table comes with its connection. */
  node: RedisNode | undefined;
  /** performance.now() of the first send; undefined while held for the first connection. */
  firstSentAt: number | undefined;
  /** The latest send; undefined while held for the first connection. */
  sent: Send | undefined;
  settled = false;
  /** The Redis clock of the run that answered it, in Unix ms. */
  clock: number | undefined = undefined;
  /** The last deadline check found it overdue: the next one fails it if it still is. */
  suspect = false;
  /**
   * The request a reply goes to when it comes after the call failed (see StoreRequest.late),
   * for a call that writes; undefined once it has heard, or when nobody need hear.
   */
  late: LateListener<Reply> | undefined;
  readonly #expires: boolean;
  readonly #timeout: number;
  /** What the latest send returned: the expiry Redis checks, or '' for none. */
  #expiry = '';
  readonly #resolve: (value: Reply) => void;
  readonly #reject: (error: SentinelError) => void;

  constructor(
    expires: boolean,
    timeout: number,
    resolve: (value: Reply) => void,
    reject: (error: SentinelError) => void,
    late?: LateListener<Reply>,
  ) {
    this.late = late;
    this.#expires = expires;
    this.#timeout = timeout;
    this.#resolve = resolve;
    this.#reject = reject;
  }

  get wanted(): boolean {
    return !this.settled;
  }

  /** It writes (a consume, a penalty or a refund), so Redis must not run it late. */
  get expires(): boolean {
    return this.#expires;
  }

  sending(): string {
    const node = this.node as RedisNode;
    const at = performance.now();
    this.firstSentAt ??= at;
    const listening = listeningTime();
    const deadline = node.deadline(this.#timeout) - giveUpLead(this.#timeout);
    if (!this.#expires) {
      this.sent = { at, listening, mayGiveUpAt: at, deadline };
      this.#expiry = '';
      return '';
    }
    // Redis does nothing with the call once its clock reads past the earliest reading it may
    // have when the store may give up (in whole ms, less one: it compares whole ms), so Redis
    // cannot run the call after that. Redis has the deadline less what this process does not
    // know of its clock to run it, a millisecond or two; a call that reaches it too late is
    // answered as such, with Redis's clock, and sent again. A process that read its replies
    // late, as a busy one does, knows the clock only to within that lateness: it then may give
    // up later, so that Redis keeps at least half the deadline, though never past the backstop.
    // Otherwise a burst from a busy process expires before it arrives, and so does each call
    // sent again (lateness of 160 ms seen beside a CPU hog).
    const later = node.clock.uncertainty(at) - deadline / 2;
    const mayGiveUpAt =
      at + Math.min(this.#timeout * BACKSTOP_TIMEOUTS, deadline + Math.max(0, later));
    this.sent = { at, listening, mayGiveUpAt, deadline };
    this.#expiry = String(Math.floor(node.clock.earliest(mayGiveUpAt)) - 1);
    return this.#expiry;
  }

  /**
   * Marks the call sent in the same script call as `model`, of its kind (both write, or neither)
   * and just sent: the same moment, deadline and expiry, without reading the clocks again for
   * each request of a batch. Without a model it is sent on its own.
   */
  sendingWith(model: RedisCall | undefined): string {
    if (model?.sent === undefined || model.#expires !== this.#expires) return this.sending();
    this.firstSentAt ??= model.sent.at;
    this.sent = model.sent;
    this.#expiry = model.#expiry;
    return this.#expiry;
  }

  // Counted from the first send: waiting for the first connection spends none of it.
  mayResend(): boolean {
    const first = this.firstSentAt;
    return first !== undefined && performance.now() - first < this.#timeout * BACKSTOP_TIMEOUTS;
  }

  /**
   * Answers the caller with Redis's reply; or, for a call already failed (given up on), hands it
   * to whoever hears of late replies: Redis ran the call after all, and the caller was told
   * otherwise. At most once: a call runs at most once, and the reply of its one run goes there.
   */
  resolve(value: Reply): void {
    const late = this.late;
    this.late = undefined;
    if (!this.settled) {
      this.settled = true;
      this.#resolve(value);
    } else {
      late?.late?.(value);
    }
  }

  fail(error: SentinelError): void {
    if (this.settled) return;
    this.settled = true;
    this.#reject(error);
  }
}
