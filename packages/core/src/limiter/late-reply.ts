// A reply that comes after the store gave up on its call: the call ran, though its caller was
// answered without it. What a consume took then is given back, as `refund()` gives it back.
import { SentinelError } from '../shared/errors.ts';
import type { Store, StoreReply } from '../shared/types.ts';
import { IdentityRequest } from '../stores/store-keys.ts';
import type { ResolvedOptions } from './options.ts';

/** What of the limiter a late reply needs: its store, clock, reporting and observers. */
type LimiterParts = Pick<ResolvedOptions, 'report' | 'observers'> & {
  readonly clock: (() => number) | undefined;
  readonly store: Store;
};

/**
 * Handles the reply to `request` that came after the store gave up on it. Its caller was answered
 * by `onStoreError` (or `refund()` or `penalize()` rejected), yet Redis ran it, just before the
 * expiry it carried, and its reply came too late to count:
 *
 * - a consume that was admitted took its cost from every policy: `send` gives it back, into the
 *   windows it was charged in, as `refund()` would, and releases its concurrency slots. A
 *   degraded decision keeps no charge, so no caller can give the same units back a second time. The refund is sent once, and never
 *   again, whatever becomes of it: it carries an expiry too, so either it ran or it never will,
 *   and a refund given up on may still have run (its own late reply then needs nothing more).
 *   When it fails, the units stay taken; `onError` and the observers hear of it.
 * - a refund made by `refund()` rejected, and the decision got its units back to give: they are
 *   taken off again, so that they are not given back twice. Units already given back a second
 *   time, by a refund made between the rejection and this reply, stay given back.
 * - a penalty was taken: its caller asked for it, so it stays, though told it failed.
 * - a refusal consumed nothing (a penalty box it opened stays: the identity had gone past the
 *   limit), and a peek writes nothing: neither needs anything.
 */
export function lateReply(
  parts: LimiterParts,
  request: IdentityRequest,
  reply: StoreReply,
  send: (refund: IdentityRequest) => Promise<unknown>,
): void {
  const { adjust } = request;
  if (adjust !== undefined) {
    const charge = request.refundOf;
    if (adjust.kind === 'refund' && charge !== undefined) {
      charge.left -= Math.min(request.cost, charge.left);
    }
    return;
  }
  // A store that cannot say when it charged cannot be told which window to give back to.
  if (!request.apply || !reply.allowed || reply.at === undefined) return;
  const { identity, layout, cost } = request;
  const refund = new IdentityRequest(identity, layout, cost, false, parts.clock?.());
  refund.adjust = { kind: 'refund', at: reply.at };
  // Concurrency slots are not a refund's: they are released beside it.
  let given: Promise<unknown> = send(refund);
  if (layout.plan.lease !== undefined) {
    const release = new IdentityRequest(identity, layout, cost, false, parts.clock?.());
    release.adjust = { kind: 'release', at: reply.at };
    given = Promise.all([given, send(release)]);
  }
  const { observers, store } = parts;
  const tier = layout.plan.tier;
  const server = store.serverOf?.(request.keys) ?? '';
  given.then(
    () => observers?.lateRefund?.({ identity, tier, cost, server, error: undefined }),
    (failure: unknown) => {
      const cause = failure instanceof SentinelError ? failure : undefined;
      const error = new SentinelError(
        cause?.code ?? 'STORE_FAILED',
        `A consume the store gave up on was admitted after all, and giving back its cost of ${cost} failed: ${
          failure instanceof Error ? failure.message : String(failure)
        }`,
        { cause: failure },
      );
      parts.report(error);
      observers?.lateRefund?.({ identity, tier, cost, server, error });
    },
  );
}
