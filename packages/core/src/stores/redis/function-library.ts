// Whether the store's calls may run as FCALL of Sentinel's function library, and its loading.
import type { RedisConnection } from './connection.ts';
import { library } from './scripts.generated.ts';

/** How long an FCALL try or a load may go unanswered before another may be sent. */
const WAIT_MS = 10_000;
/** How long after a failed load the next may be tried. */
const RETRY_MS = 1_000;

/**
 * Redis 7 and later keep functions: FCALL runs code defined once per server, where a script
 * defines its functions on every call, a fifth of a one-policy call's cost to Redis. The library
 * is loaded only where a server says it is missing: another instance of this version has most
 * often loaded it already, and loading it costs Redis a compile. So the store's first call tries
 * FCALL while the others run as scripts (EVALSHA); once one FCALL has run, all go by FCALL. A
 * server that answers that the function is missing (a cold server, a restart without
 * persistence, FUNCTION FLUSH, a new Cluster master) has run nothing: calls run as scripts while
 * the library is loaded on every server, then by FCALL again. A Redis without functions (before
 * 7.0), or a user whom ACLs deny FCALL, or FUNCTION where the library is missing, keeps calls on
 * scripts for good.
 */
export class FunctionLibrary {
  readonly #client: Pick<RedisConnection, 'loadLibrary' | 'isReplyError'>;
  #state: 'untried' | 'trying' | 'usable' | 'loading' | 'unloaded' | 'unsupported' = 'untried';
  /** performance.now() when the last FCALL try or load was sent, or when the next may be. */
  #at = Number.NEGATIVE_INFINITY;

  constructor(client: Pick<RedisConnection, 'loadLibrary' | 'isReplyError'>) {
    this.#client = client;
  }

  /**
   * Whether a call may be sent by FCALL now. While none has run, one call at a time tries it,
   * and another may once that try has gone unanswered too long; a library that failed to load
   * is loaded again once its retry time has come.
   */
  usable(): boolean {
    if (this.#state === 'usable') return true;
    if (this.#state === 'unsupported') return false;
    const now = performance.now();
    if (this.#state === 'untried' || (this.#state === 'trying' && now - this.#at >= WAIT_MS)) {
      this.#state = 'trying';
      this.#at = now;
      return true;
    }
    if (
      this.#state === 'unloaded'
        ? now >= this.#at
        : this.#state === 'loading' && now - this.#at >= WAIT_MS
    ) {
      this.#load(now);
    }
    return false;
  }

  /** An FCALL ran: the library is on that server. */
  ran(): void {
    if (this.#state === 'trying') this.#state = 'usable';
  }

  /** An FCALL failed for a reason that says nothing of the library: let the next call try. */
  unsure(): void {
    if (this.#state === 'trying') this.#state = 'untried';
  }

  /** A server answered that the library's function is missing: load it, now. */
  missing(): void {
    if (this.#state === 'usable' || this.#state === 'trying') this.#load(performance.now());
  }

  /** Redis refused FCALL itself (an older server, an ACL): scripts from now on. */
  refused(): void {
    this.#state = 'unsupported';
  }

  #load(now: number): void {
    this.#state = 'loading';
    this.#at = now;
    this.#client.loadLibrary(library.source).then(
      () => {
        // Unless a later load, sent after this one went unanswered too long, has taken over.
        if (this.#state === 'loading' && this.#at === now) this.#state = 'usable';
      },
      (error: unknown) => {
        if (this.#state !== 'loading' || this.#at !== now) return;
        if (isRefusal(error, this.#client)) {
          this.#state = 'unsupported';
        } else {
          // A lost connection, a server still loading its data: try again soon.
          this.#state = 'unloaded';
          this.#at = performance.now() + RETRY_MS;
        }
      },
    );
  }
}

/** FCALL's answer when the library is not loaded on the server it reached. */
export function isNoFunctionError(error: unknown): boolean {
  return error instanceof Error && error.message.includes('Function not found');
}

/** Redis saying no to functions themselves: a server without them, or an ACL that denies them. */
export function isRefusal(error: unknown, client: Pick<RedisConnection, 'isReplyError'>): boolean {
  return (
    client.isReplyError(error) &&
    /unknown command|unknown subcommand|^NOPERM/i.test((error as Error).message)
  );
}
