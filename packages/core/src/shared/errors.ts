// Errors Sentinel reports through `onError`. Each carries a stable `code` to branch on.

export type SentinelErrorCode =
  /** The store sent nothing for the deadline while this process was waiting to hear it. */
  | 'STORE_TIMEOUT'
  /** The store is answering, but so far behind that it ran the call after its deadline. */
  | 'STORE_BUSY'
  /** The store's connection is down or was never made. */
  | 'STORE_UNAVAILABLE'
  /** The store answered with an error. */
  | 'STORE_FAILED'
  /** A consume, peek or reset named a tier the limiter was not given. */
  | 'UNKNOWN_TIER'
  /** A fetch adapter's runtime gave no client address for a request (see its `getConnInfo` or `clientIp`). */
  | 'NO_CLIENT_ADDRESS';

export class SentinelError extends Error {
  override readonly name = 'SentinelError';
  readonly code: SentinelErrorCode;

  constructor(code: SentinelErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}
