// Skips a failing store for a cool-down after repeated failures, then lets one probe through.
import type { BreakerEvent } from '../observe/observer.ts';
import { checkObject, checkPositiveInteger, rejectUnknownFields } from '../shared/validation.ts';

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
  readonly #onChange: ((state: BreakerEvent['state']) => void) | undefined;

  /** Options as the limiter's `breaker`, checked by {@link CircuitBreakers}. */
  constructor(
    { failures = 3, cooldownMs = 1000 }: CircuitBreakerOptions = {},
    onChange?: (state: BreakerEvent['state']) => void,
  ) {
    this.#threshold = failures;
    this.#cooldownMs = cooldownMs;
    this.#onChange = onChange;
  }

  /** Whether calls skip the store, or only probe it: read without taking the probe's turn. */
  get open(): boolean {
    return this.#open;
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
    this.#probing = false;
    if (this.#open) {
      this.#open = false;
      this.#onChange?.('closed');
    }
  }

  failure(now: number): void {
    this.#probing = false;
    this.#failures++;
    if (this.#failures >= this.#threshold) {
      this.#probeAt = now + this.#cooldownMs;
      if (!this.#open) {
        this.#open = true;
        this.#onChange?.('open');
      }
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
  readonly #onChange: ((event: BreakerEvent) => void) | undefined;

  constructor(options: CircuitBreakerOptions = {}, onChange?: (event: BreakerEvent) => void) {
    checkObject(options, 'breaker', '{ failures, cooldownMs } or false');
    rejectUnknownFields(options, BREAKER_OPTION_NAMES, 'breaker');
    const { failures, cooldownMs } = options;
    if (failures !== undefined) checkPositiveInteger(failures, 'breaker.failures');
    if (cooldownMs !== undefined) checkPositiveInteger(cooldownMs, 'breaker.cooldownMs');
    this.#options = options;
    this.#onChange = onChange;
    this.of('');
  }

  of(server: string): CircuitBreaker {
    let breaker = this.#byServer.get(server);
    if (breaker === undefined) {
      const onChange = this.#onChange;
      breaker = new CircuitBreaker(
        this.#options,
        onChange && ((state) => onChange({ server, state })),
      );
      this.#byServer.set(server, breaker);
    }
    return breaker;
  }

  probeNow(): void {
    for (const breaker of this.#byServer.values()) breaker.probeNow();
  }
}
