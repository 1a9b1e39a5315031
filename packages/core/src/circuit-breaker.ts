// Skips a failing store for a cool-down after repeated failures, then lets one probe through.
import { checkObject, checkPositiveInteger, rejectUnknownFields } from './validation.ts';

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

const BREAKER_OPTIONS = { failures: true, cooldownMs: true } as const satisfies Record<
  keyof CircuitBreakerOptions,
  true
>;
const BREAKER_OPTION_NAMES = Object.keys(BREAKER_OPTIONS);

export class CircuitBreaker {
  readonly #threshold: number;
  readonly #cooldownMs: number;
  #failures = 0;
  #open = false;
  /** While open, when the next probe may go. */
  #probeAt = 0;
  #probing = false;

  /** Options as the limiter's `breaker`, checked by {@link CircuitBreakers}. */
  constructor({ failures = 3, cooldownMs = 1000 }: CircuitBreakerOptions = {}) {
    this.#threshold = failures;
    this.#cooldownMs = cooldownMs;
  }

  /** Whether a call may go to the store now. While open, admits one probe after the cool-down. */
  allow(now: number): boolean {
    if (!this.#open) return true;
    if (this.#probing || now < this.#probeAt) return false;
    this.#probing = true;
    return true;
  }

  success(): void {
    this.#failures = 0;
    this.#open = false;
    this.#probing = false;
  }

  failure(now: number): void {
    this.#probing = false;
    this.#failures++;
    if (this.#failures >= this.#threshold) {
      this.#open = true;
      this.#probeAt = now + this.#cooldownMs;
    }
  }

  /** The store says it is back: the next call probes it without waiting out the cool-down. */
  probeNow(): void {
    this.#probeAt = 0;
  }
}

/** One breaker per server of a store, so that a failing Cluster master trips only its own. */
export class CircuitBreakers {
  readonly #options: CircuitBreakerOptions;
  readonly #byServer = new Map<string, CircuitBreaker>();

  constructor(options: CircuitBreakerOptions = {}) {
    checkObject(options, 'breaker', '{ failures, cooldownMs } or false');
    rejectUnknownFields(options, BREAKER_OPTION_NAMES, 'breaker');
    const { failures, cooldownMs } = options;
    if (failures !== undefined) checkPositiveInteger(failures, 'breaker.failures');
    if (cooldownMs !== undefined) checkPositiveInteger(cooldownMs, 'breaker.cooldownMs');
    this.#byServer.set('', new CircuitBreaker(options));
    this.#options = options;
  }

  of(server: string): CircuitBreaker {
    let breaker = this.#byServer.get(server);
    if (breaker === undefined) {
      breaker = new CircuitBreaker(this.#options);
      this.#byServer.set(server, breaker);
    }
    return breaker;
  }

  probeNow(): void {
    for (const breaker of this.#byServer.values()) breaker.probeNow();
  }
}
