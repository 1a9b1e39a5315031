// `ban`: an identity's refusals counted in the store, so that every gateway agrees when its 429s end and its 403s begin.
import { createLimiter, type Limiter, type LimiterOptions } from '../limiter/limiter.ts';
import type { Decision, PolicyOptions, Window } from '../shared/types.ts';
import { storeOptionsOf } from './store-options.ts';
import type { Ban } from './verdict.ts';

/** The window of the limiter's fallback policy, which no call uses: each brings its own. */
const UNUSED_WINDOW = '1d';

/**
 * Counts refusals per identity with a limiter of its own, over the same store and prefix with
 * `:ban` after it. Its one fixed-window policy admits `refusals` per window as long as the
 * longest of the refused identity's policies, so its refusal is the ban: decided atomically in
 * the store like any consume, exact under concurrency and shared by every gateway. It is consumed
 * only by refusals, and fails open: a store failure answers a 429, never a 403.
 */
export class BanCounter {
  readonly #refusals: number;
  readonly #limiter: Limiter | undefined;
  /** `options` are the identity limiter's, with the prefix its group gave it. */
  constructor(refusals: number, options: Omit<LimiterOptions, 'onError'>, onError: () => void) {
    this.#refusals = refusals;
    if (refusals === 0) return;
    this.#limiter = createLimiter({
      ...storeOptionsOf(options),
      prefix: `${options.prefix ?? 'sentinel'}:ban`,
      policies: this.#policy(UNUSED_WINDOW),
      onStoreError: 'allow',
      onError,
    });
  }

  /** Refusals only pay for it: the limiter's plan cache finds a set it has seen by its contents. */
  #policy(window: Window): PolicyOptions {
    return { name: 'ban', limit: this.#refusals, window, algorithm: 'fixed-window' };
  }

  /**
   * Counts a refusal of `key` (by its limits for now, not for a cost over them): the ban, when it
   * is past the count, or undefined. A store failure is reported and answers undefined.
   */
  async count(
    key: string,
    refusal: Decision,
    report: (error: unknown) => void,
  ): Promise<Ban | undefined> {
    const windowMs = Math.max(...refusal.policies.map((p) => p.windowMs));
    if (this.#limiter === undefined) return { refusals: 0, windowMs };
    let counted: Decision;
    try {
      counted = await this.#limiter.consume(key, { policies: this.#policy(windowMs) });
    } catch (error) {
      report(error);
      return undefined;
    }
    if (counted.error) report(counted.error);
    if (counted.allowed || counted.degraded !== undefined) return undefined;
    return { refusals: this.#refusals, windowMs };
  }

  close(): Promise<void> {
    return this.#limiter?.close() ?? Promise.resolve();
  }
}
