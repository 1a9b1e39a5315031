// The framework-free heart of every adapter: identify, limit, and say what to answer.
import { createLimiter, type Limiter, type LimiterOptions, legsOf } from '../limiter/limiter.ts';
import { SHORTHAND_FIELDS } from '../limiter/options.ts';
import { connectOnce, type SharedConnection, storeOnce } from '../limiter/shared-connection.ts';
import { createReporter } from '../observe/reporter.ts';
import { BanCounter } from './ban.ts';
import { type HttpLimiterOptions, type HttpSettings, resolveHttpOptions } from './http-options.ts';
import type { RequestLike } from './identity.ts';
import { type NodeResponse, RefundByOutcome } from './refund-by-outcome.ts';
import { RequestChecks } from './request-check.ts';
import { LoadShedder } from './shed.ts';
import type { Verdict } from './verdict.ts';

export type { HttpLimiterOptions } from './http-options.ts';
export type { NodeResponse } from './refund-by-outcome.ts';
export type { RefusalReason, Verdict } from './verdict.ts';

export interface HttpLimiter<Req, Res = unknown> {
  /**
   * The verdict on a request: at once where nothing had to wait (a quota lease's decision, a
   * request skipped or left alone), else its promise. `await` takes either.
   */
  check(req: Req): Verdict | Promise<Verdict>;
  /**
   * After an admitted request: watches its response, to count it by its outcome when asked to
   * (`skipSuccessfulRequests`, `skipFailedRequests`), and to release the concurrency slots its
   * decision holds once the response is done or its client has left. Call it for every verdict
   * `check` passes; it does nothing, at no cost, when there is nothing to follow.
   */
  countByOutcome(verdict: Verdict, req: Req, res: Res, raw: NodeResponse): void;
  /**
   * The two halves of `countByOutcome`, for an adapter that has the response's end before the
   * response itself (a fetch API handler still running when its client leaves): the slots go back
   * when `raw` closes, and the outcome is counted once the response is there.
   */
  releaseSlots(verdict: Verdict, req: Req, raw: NodeResponse): void;
  countOutcome(verdict: Verdict, req: Req, res: Res, raw: NodeResponse): void;
  /**
   * Whether `countByOutcome` follows this verdict's response: for an adapter that must wrap a
   * response to see its end (a fetch API body), and should not when nothing follows it.
   */
  follows(verdict: Verdict): boolean;
  /** Reports a failure the adapter found with a request, as the limiter's own are reported. */
  report(error: unknown, req: Req): void;
  readonly limiter: Limiter;
  close(): Promise<void>;
}

/**
 * The limiter's onError. Every failure it reports also rides on the decision it returns, and
 * this layer reports it from there, once, with its request; the limiter has none to give.
 */
function reportedFromTheDecision(): void {}

/**
 * A route's options over the app's, as every adapter layers them. Options that cannot be
 * combined replace each other: a route naming its own policies (`policies`, `tiers`, or a
 * policy's fields at the top level, such as `limit`) replaces the app's, and one naming `store`,
 * `redis` or `redisUrl` replaces the app's store.
 */
export function mergeHttpLimiterOptions<Req, Res>(
  base: HttpLimiterOptions<Req, Res>,
  route: Partial<HttpLimiterOptions<Req, Res>>,
): HttpLimiterOptions<Req, Res> {
  const merged: HttpLimiterOptions<Req, Res> = { ...base };
  const names = (...keys: readonly (keyof HttpLimiterOptions<Req, Res>)[]) =>
    keys.some((key) => route[key] !== undefined);
  const drop = (...keys: readonly (keyof HttpLimiterOptions<Req, Res>)[]) => {
    for (const key of keys) delete merged[key];
  };
  if (names('policies', 'tiers')) drop(...SHORTHAND_FIELDS);
  if (names('policies', 'tiers', ...SHORTHAND_FIELDS)) drop('policies', 'tiers', 'defaultTier');
  if (names('store')) drop('redis', 'redisUrl', 'timeout', 'connectTimeout');
  if (names('redis')) drop('store', 'redisUrl');
  if (names('redisUrl')) drop('store', 'redis');
  return { ...merged, ...route };
}

/**
 * The identity limiter, the ban counter and the fleet's count, over one connection and one store:
 * with a counter or `shed`, a Redis client from `redisUrl` is built here for all of them (see
 * connectOnce), and one store on it (see storeOnce), both closed again if the options prove bad.
 * Without either (no `ban`, or `ban: 0`, which counts nothing), the limiter builds its own.
 */
function buildLimiters<Req, Res>(settings: HttpSettings<Req, Res>) {
  const { limiterOptions, ban, shed } = settings;
  const shared = Boolean(ban || shed);
  const client = shared
    ? connectOnce(limiterOptions)
    : { options: limiterOptions, close: noClient };
  let store: SharedConnection<LimiterOptions> | undefined;
  const close = async () => {
    await store?.close();
    await client.close();
  };
  try {
    store = shared ? storeOnce(client.options) : undefined;
    const options = store?.options ?? client.options;
    const limiter = createLimiter({ ...options, onError: reportedFromTheDecision });
    const bans =
      ban === undefined ? undefined : new BanCounter(ban, options, reportedFromTheDecision);
    const shedder =
      shed === undefined
        ? undefined
        : new LoadShedder<Req>(shed, options, reportedFromTheDecision, legsOf(limiter).telemetry);
    return { limiter, bans, shedder, connection: { close } };
  } catch (error) {
    void close();
    throw error;
  }
}

const noClient = () => Promise.resolve();

/** Resolves adapter options once; `check` then runs per request. */
export function createHttpLimiter<Req extends RequestLike, Res = unknown>(
  options: HttpLimiterOptions<Req, Res>,
): HttpLimiter<Req, Res> {
  const settings = resolveHttpOptions(options);
  const { limiter, bans, shedder, connection } = buildLimiters(settings);
  const report = createReporter<[Req]>(
    settings.onError,
    '@sentinel/core',
    settings.limiterOptions.logger,
  );
  const refunds = new RefundByOutcome<Req, Res>(limiter, settings, report);
  const checks = new RequestChecks(settings, limiter, bans, refunds, report, shedder);

  /** Concurrency slots are held while the response is written, and released once it is done. */
  function releaseSlots(verdict: Verdict, req: Req, raw: NodeResponse): void {
    if (verdict.action !== 'next') return;
    const { decision, fleet, within } = verdict;
    // 'close' comes once the response is done, and also when the client goes away first or the
    // handler's error ends it.
    if (decision?.lease !== undefined || fleet !== undefined || within !== undefined) {
      const release = () => {
        const failed = (error: unknown) => report(error, req);
        if (decision?.lease !== undefined) limiter.release(decision).catch(failed);
        if (within !== undefined) limiter.release(within).catch(failed);
        if (fleet !== undefined) shedder?.release(fleet, failed);
      };
      // A client that left while the decision was being made closed the response already.
      if (raw.closed === true) release();
      else raw.once('close', release);
    }
  }

  return {
    check: (req) => checks.check(req),
    follows(verdict) {
      if (verdict.action !== 'next') return false;
      if (refunds.active && verdict.decision !== undefined) return true;
      return (
        verdict.decision?.lease !== undefined ||
        verdict.fleet !== undefined ||
        verdict.within !== undefined
      );
    },
    report,
    countByOutcome(verdict, req, res, raw) {
      if (refunds.active) refunds.watch(verdict.decision, req, res, raw);
      releaseSlots(verdict, req, raw);
    },
    releaseSlots,
    countOutcome(verdict, req, res, raw) {
      if (refunds.active) refunds.watch(verdict.decision, req, res, raw);
    },
    limiter,
    async close() {
      await Promise.all([limiter.close(), bans?.close(), shedder?.close()]);
      await connection.close();
    },
  };
}
