// What this process knows of a Redis server's clock, learnt from the times its replies carry.

/** Samples older than this give way to the next one, so that drift and steps are followed. */
const SAMPLE_LIFETIME_MS = 5_000;

/**
 * The server's clock minus this process's `performance.now()`, known to lie in an interval. A
 * reply carries the server's clock (whole ms) when it ran the call, which happened after the
 * call was sent and before its reply was read: the offset lies between the clock minus the read
 * time and the clock plus 1 minus the send time. Replies narrow the interval; one that falls
 * outside it, or a stale interval, starts it anew. A busy process reads replies late, which only
 * widens the interval. No gateway clock needs to agree with Redis.
 */
export class ServerClock {
  /** Before the first reply, the clocks are assumed to agree, with no uncertainty. */
  #low = performance.timeOrigin;
  #high = performance.timeOrigin;
  #sampled = false;
  #sampledAt = 0;

  /** Records a reply's server time (Unix ms) for a command sent at `sentAt` and read at `readAt`. */
  observe(serverMs: number, sentAt: number, readAt: number): void {
    const low = serverMs - readAt;
    const high = serverMs + 1 - sentAt;
    const fresh =
      !this.#sampled ||
      low > this.#high ||
      high < this.#low ||
      readAt - this.#sampledAt > SAMPLE_LIFETIME_MS;
    if (fresh) {
      this.#low = low;
      this.#high = high;
      this.#sampled = true;
      this.#sampledAt = readAt;
    } else {
      this.#low = Math.max(this.#low, low);
      this.#high = Math.min(this.#high, high);
    }
  }

  /** The width of the interval, in ms. */
  get uncertainty(): number {
    return this.#high - this.#low;
  }

  /** The latest the server's clock can read at local time `at` (a `performance.now()`). */
  latest(at: number): number {
    return at + this.#high;
  }
}
