// skipSuccessfulRequests and skipFailedRequests: a request counts when it arrives, and is given back once its response says it should not have.
import type { Limiter } from '../limiter/limiter.ts';
import type { Decision } from '../shared/types.ts';
import { describe } from '../shared/validation.ts';
import type { OutcomeSettings } from './http-options.ts';

/** The Node response under every framework's: Express's `res`, Koa's `ctx.res`, Fastify's `reply.raw`. */
export interface NodeResponse {
  readonly statusCode: number;
  readonly writableFinished: boolean;
  /** True once 'close' was emitted: Node's responses have it, since Node 18. */
  readonly closed?: boolean;
  once(event: 'finish' | 'close', listener: () => void): unknown;
}

/** A decision that took from the store, and the key it took for. */
export interface Charged {
  key: string;
  decision: Decision;
}

/**
 * Calls `ended` once: with true when the response was handed to the OS in full, with false when
 * the connection closed before that, a client that left.
 */
function whenEnded(res: NodeResponse, ended: (finished: boolean) => void): void {
  let done = false;
  const end = (finished: boolean) => {
    if (done) return;
    done = true;
    ended(finished);
  };
  res.once('finish', () => end(true));
  res.once('close', () => end(res.writableFinished));
}

/**
 * Gives back what an admitted request took when its outcome should not count. The request was
 * counted when it arrived, so that a burst cannot pass the limit while responses are pending;
 * the refund follows the response, so that it never delays it, and goes to the policies and the
 * window the request was charged in. A failed refund, or a `requestWasSuccessful` that throws, is
 * reported with the request, which then stays counted.
 */
export class RefundByOutcome<Req, Res> {
  readonly #limiter: Limiter;
  readonly #settings: OutcomeSettings<Req, Res>;
  readonly #report: (error: unknown, req: Req) => void;
  /**
   * What each decision whose outcome decides took: its key, and the charge of an identity it
   * counted within, if any. Nothing else is kept.
   */
  readonly #charges = new WeakMap<Decision, readonly Charged[]>();

  constructor(
    limiter: Limiter,
    settings: OutcomeSettings<Req, Res>,
    report: (error: unknown, req: Req) => void,
  ) {
    this.#limiter = limiter;
    this.#settings = settings;
    this.#report = report;
  }

  /** Whether any outcome gives back: without either option, nothing is kept or watched. */
  get active(): boolean {
    return this.#settings.skipSuccessfulRequests || this.#settings.skipFailedRequests;
  }

  /**
   * Remembers the key of a decision `check` made, if its outcome may give it back: admitted, and
   * by the store (a degraded decision consumed nothing there). Shadow mode's admissions count.
   * `also` is what the request took besides, for an identity counted within another.
   */
  charged(key: string, decision: Decision, also?: Charged): void {
    if (this.active && decision.allowed && decision.degraded === undefined) {
      const own = { key, decision };
      this.#charges.set(
        decision,
        also?.decision.degraded === undefined && also ? [own, also] : [own],
      );
    }
  }

  /** Watches the response of a request passed with `decision`; anything else costs nothing. */
  watch(decision: Decision | undefined, req: Req, res: Res, raw: NodeResponse): void {
    if (decision === undefined) return;
    const charges = this.#charges.get(decision);
    if (charges === undefined) return;
    // Once: a request a second middleware of this limiter sees is watched by the first alone.
    this.#charges.delete(decision);
    whenEnded(raw, (finished) => {
      void this.#settle(charges, req, res, finished ? raw.statusCode : undefined);
    });
  }

  /** `status` is undefined for a client that left, which counts as a failure. */
  async #settle(
    charges: readonly Charged[],
    req: Req,
    res: Res,
    status: number | undefined,
  ): Promise<void> {
    const { skipSuccessfulRequests, skipFailedRequests, requestWasSuccessful } = this.#settings;
    let succeeded = false;
    if (status !== undefined) {
      try {
        succeeded = await (requestWasSuccessful ? requestWasSuccessful(req, res) : status < 400);
      } catch (error) {
        this.#report(error, req);
        return;
      }
      if (typeof succeeded !== 'boolean') {
        const returned = describe(succeeded);
        this.#report(
          new TypeError(`\`requestWasSuccessful\` returned ${returned}, not true or false`),
          req,
        );
        return;
      }
    }
    if (!(succeeded ? skipSuccessfulRequests : skipFailedRequests)) return;
    await Promise.all(
      charges.map(({ key, decision }) =>
        this.#limiter.refund(key, { decision }).catch((error: unknown) => this.#report(error, req)),
      ),
    );
  }
}
