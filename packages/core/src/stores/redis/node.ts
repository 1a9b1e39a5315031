// One Redis server as the store sees it: when it was last heard, its clock, its script loads.

import { listeningTime } from './listening-time.ts';
import type { Send } from './send.ts';
import { ServerClock } from './server-clock.ts';

/**
 * A standalone server, or one master of a Cluster. Liveness is kept per server, not per client:
 * a hung master must not hide behind the replies of the others, nor make their callers wait.
 */
export class RedisNode {
  /** `host:port` of a Cluster master; '' for a standalone server. */
  readonly name: string;
  readonly clock = new ServerClock();
  /** performance.now() when the server last replied to anything. */
  heardAt = Number.NEGATIVE_INFINITY;
  /** listeningTime() then. */
  heardListening = Number.NEGATIVE_INFINITY;
  /**
   * A call gave up on the server's silence, or met a failed connection, and the server has not
   * been heard since: other calls on it need not wait for proof of their own.
   */
  down = false;
  /** Script loads in flight, by SHA1: the calls that met NOSCRIPT wait for one load each. */
  readonly #loads = new Map<string, Promise<unknown>>();
  /** The longest wait for a reply, in listening ms, as of `#longestWaitAt`; it halves every 10 s. */
  #longestWait = 0;
  #longestWaitAt = 0;

  constructor(name: string) {
    this.name = name;
  }

  /**
   * Any reply, an error reply included, is a sign of life. A script's reply to a send whose call
   * is still wanted also carries the server's clock, and tells how long the process waited for it.
   */
  heard(serverMs?: number, sent?: Pick<Send, 'at' | 'listening'>) {
    const now = performance.now();
    const listening = listeningTime();
    if (serverMs !== undefined && sent !== undefined) {
      this.clock.observe(serverMs, sent.at, now);
      const waited = listening - Math.max(sent.listening, this.heardListening);
      this.#longestWait = Math.max(waited, this.#recentLongestWait(now));
      this.#longestWaitAt = now;
    }
    this.heardAt = now;
    this.heardListening = listening;
    this.down = false;
  }

  /**
   * The silence, in listening ms, after which a call sent now gives up: `timeout`, or up to
   * twice that while this server has lately made the process wait long for replies, as a
   * machine short of CPU makes it. TCP stretches its retransmission timer the same way.
   */
  deadline(timeout: number): number {
    const longest = this.#recentLongestWait(performance.now());
    return Math.min(2 * timeout, Math.max(timeout, 2 * longest));
  }

  #recentLongestWait(now: number): number {
    return this.#longestWait * 0.5 ** ((now - this.#longestWaitAt) / 10_000);
  }

  /** The load of `sha1` in flight, if any. */
  loading(sha1: string): Promise<unknown> | undefined {
    return this.#loads.get(sha1);
  }

  /** Sends a command that loads `sha1`, and lets other calls wait for it until it is answered. */
  load<T>(sha1: string, send: () => Promise<T>): Promise<T> {
    const sent = send();
    const done = sent.then(
      () => {},
      () => {},
    );
    this.#loads.set(sha1, done);
    void done.then(() => {
      if (this.#loads.get(sha1) === done) this.#loads.delete(sha1);
    });
    return sent;
  }
}
