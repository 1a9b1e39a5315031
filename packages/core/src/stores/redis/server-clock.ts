// What this process knows of a Redis server's clock, learnt from the times its replies carry.

/**
 * The fastest the server's clock is taken to gain or lose on this process's, in ms per ms:
 * 200 ppm, ten times a typical crystal's error. A clock that was set, or slewed faster, shows
 * as a reply outside the interval, which then starts anew.
 */
const MAX_DRIFT = 2e-4;

/**
 * The server's clock minus this process's `performance.now()`, known to lie in an interval. A
 * reply carries the server's clock (whole ms) when it ran the call, which happened after the
 * call was sent and before its reply was read: the offset lies between the clock minus the read
 * time and the clock plus 1 minus the send time. Each reply narrows the interval, which widens
 * by the most the clocks can drift apart in the time since; a reply that falls outside it, as
 * after a clock was set, starts it anew. A busy process reads replies late, which only widens
 * what one reply tells. No gateway clock needs to agree with Redis.
 */
export class ServerClock {
  /** Before the first reply, the clocks are assumed to agree, with no uncertainty. */
  #low = performance.timeOrigin;
  #high = performance.timeOrigin;
  #sampled = false;
  /** When a reply last narrowed the interval (performance.now()). */
  #sampledAt = 0;

  /** Records a reply's server time (Unix ms) for a command sent at `sentAt` and read at `readAt`. */
  observe(serverMs: number, sentAt: number, readAt: number): void {
    const low = serverMs - readAt;
    const high = serverMs + 1 - sentAt;
    if (this.#sampled) {
      // What the earlier replies told, still true since unless a clock was set.
      const drift = this.#drift(readAt);
      const knownLow = this.#low - drift;
      const knownHigh = this.#high + drift;
      if (low <= knownHigh && high >= knownLow) {
        this.#low = Math.max(knownLow, low);
        this.#high = Math.min(knownHigh, high);
        this.#sampledAt = readAt;
        return;
      }
    }
    this.#low = low;
    this.#high = high;
    this.#sampled = true;
    this.#sampledAt = readAt;
  }

  /** The earliest the server's clock can read at local time `at` (a `performance.now()`). */
  earliest(at: number): number {
    return at + this.#low - this.#drift(at);
  }

  /** How far apart the earliest and the latest reading of the server's clock lie at `at`. */
  uncertainty(at: number): number {
    return this.#high - this.#low + 2 * this.#drift(at);
  }

  /** The most the clocks can have drifted apart between the last narrowing and `at`. */
  #drift(at: number): number {
    return this.#sampled ? Math.max(0, at - this.#sampledAt) * MAX_DRIFT : 0;
  }
}
