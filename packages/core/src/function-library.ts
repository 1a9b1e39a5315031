// Whether the store's calls may run as FCALL of Sentinel's function library, and its loading.
import type { RedisConnection } from './redis-connection.ts';
import { library } from './scripts.generated.ts';

/** How long a load may go unanswered before another may be tried. */
const LOAD_WAIT_MS = 10_000;
/** How long after a failed load the next may be tried. */
const RETRY_MS = 1_000;

/**
 * Redis 7 and later keep functions: FCALL runs code defined once per server, where a script
 * defines its functions on every call, a fifth of a one-policy call's cost to Redis. Calls run as
 * scripts (EVALSHA) until the library is loaded on every server, then by FCALL; a server that has
 * lost it (a restart without persistence, FUNCTION FLUSH, a new Cluster master) answers that the
 * function is missing, and calls run as scripts again while it is loaded anew. A Redis without
 * functions (before 7.0), or a user whom ACLs deny them, keeps calls on scripts for good.
 */
export class FunctionLibrary {
  readonly #client: Pick<RedisConnection, 'loadLibrary' | 'isReplyError'>;
  #state: 'unloaded' | 'loading' | 'loaded' | 'unsupported' = 'unloaded';
  /** performance.now() when the last load was sent, or when the next may be. */
  #at = Number.NEGATIVE_INFINITY;

  constructor(client: Pick<RedisConnection, 'loadLibrary' | 'isReplyError'>) {
    this.#client = client;
  }

  /** Whether a call may be sent by FCALL now; the first asked while unloaded starts a load. */
  usable(): boolean {
    if (this.#state === 'loaded') return true;
    if (this.#state === 'unsupported') return false;
    const now = performance.now();
    if (this.#state === 'unloaded' ? now >= this.#at : now - this.#at >= LOAD_WAIT_MS) {
      this.#load(now);
    }
    return false;
  }

  /** A server answered that the library's function is missing: load it again, now. */
  missing(): void {
    if (this.#state === 'loaded') this.#load(performance.now());
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
        if (this.#state === 'loading' && this.#at === now) this.#state = 'loaded';
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
