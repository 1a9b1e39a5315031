// Skips a failing store for a cool-down after repeated failures, then lets one probe through.

export interface CircuitBreakerOptions {
  /**
   * Consecutive failures that open the breaker.
   * @default 3
   */
  failures?: number;
  /**
   * Milliseconds the store is skipped once the breaker opens, before one call probes it again.
   * @default 1000
   */
  cooldownMs?: number;
}

export class CircuitBreaker {
  readonly #threshold: number;
  readonly #cooldownMs: number;
  #failures = 0;
  /** 0 while closed; otherwise when the next probe may go. */
  #openUntil = 0;
  #probing = false;

  constructor({ failures = 3, cooldownMs = 1000 }: CircuitBreakerOptions = {}) {
    if (!Number.isSafeInteger(failures) || failures < 1) {
      throw new TypeError(
        `@sentinel/core: \`breaker.failures\` must be a positive integer, got ${failures}`,
      );
    }
    if (!Number.isSafeInteger(cooldownMs) || cooldownMs < 1) {
      throw new TypeError(
        `@sentinel/core: \`breaker.cooldownMs\` must be a positive integer, got ${cooldownMs}`,
      );
    }
    this.#threshold = failures;
    this.#cooldownMs = cooldownMs;
  }

  get isOpen(): boolean {
    return this.#openUntil !== 0;
  }

  /** Whether a call may go to the store now. While open, admits one probe after the cool-down. */
  allow(now: number): boolean {
    if (this.#openUntil === 0) return true;
    if (this.#probing || now < this.#openUntil) return false;
    this.#probing = true;
    return true;
  }

  success(): void {
    this.#failures = 0;
    this.#openUntil = 0;
    this.#probing = false;
  }

  failure(now: number): void {
    this.#probing = false;
    this.#failures++;
    if (this.#failures >= this.#threshold) this.#openUntil = now + this.#cooldownMs;
  }
}
