// What the evaluator asks of a call it sends, and one send's timing: shared by the call, its
// server's record and the evaluator, which otherwise would import one another.

/** One send of a call: when it went out, and the deadline it runs under. */
export interface Send {
  /** performance.now() when it went out. */
  readonly at: number;
  /** listeningTime() then. */
  readonly listening: number;
  /** performance.now() before which the store may not give up on it. */
  readonly mayGiveUpAt: number;
  /** The silence, in listening ms, after which it gives up. */
  readonly deadline: number;
}

/** A call in flight, as the evaluator sees it. */
export interface ScriptCall {
  /** False once the caller has been answered without Redis: from then on nothing is sent. */
  readonly wanted: boolean;
  /** Marks a command of the call going out now, and returns the expiry argument it carries. */
  sending(): string;
  /** The latest send, once `sending()` has been called. */
  readonly sent: Send | undefined;
  /** Whether a call that Redis ran after its expiry may be sent again. */
  mayResend(): boolean;
  /** Set to the Redis clock, in Unix ms, of the run whose reply the call resolves with. */
  clock?: number;
}
