// `shed`: every request in flight across the fleet, counted under one identity in the store, so
// that past (1 - reserve) of the capacity only critical requests are let in, up to all of it.
import { createLimiter, type Limiter, type LimiterOptions, legsOf } from '../limiter/limiter.ts';
import { TELEMETRY } from '../limiter/options.ts';
import { MAX_LOG_LIMIT } from '../limiter/policy.ts';
import type { Leg } from '../limiter/store-calls.ts';
import type { Telemetry } from '../observe/opentelemetry.ts';
import type { Decision, Window } from '../shared/types.ts';
import {
  checkFunction,
  checkObject,
  checkPositiveInteger,
  describe,
  fail,
  rejectUnknownFields,
} from '../shared/validation.ts';
import { parseWindow } from '../shared/window.ts';
import { storeOptionsOf } from './store-options.ts';

export interface ShedOptions<Req> {
  /** Requests in flight across every instance that shares the store, critical ones included. */
  concurrency: number;
  /**
   * The share of `concurrency` kept for critical requests: the others are refused with 503 once
   * (1 - reserve) × concurrency are in flight.
   * @default 0.2
   */
  reserve?: number;
  /**
   * Whether a request may use the reserve: a health check, a payment, an admin.
   * @default none is
   */
  critical?: (req: Req) => boolean | Promise<boolean>;
  /** How long a slot is held at most, should its process die holding it. @default '1m' */
  lease?: Window;
}

const SHED_FIELDS = ['concurrency', 'reserve', 'critical', 'lease'] as const;

/** The fleet's one identity: every request of every instance counts under it. */
const FLEET = 'fleet';

/** Tiers of the shedder's limiter: both count in one set of slots, named alike. */
const NORMAL = 'shed';
const CRITICAL = 'shed-critical';

/** The checked options: the slots each kind of request may fill. */
export interface ShedSettings<Req> {
  /** The app's prefix, without a group's: the whole fleet shares one count. */
  readonly prefix: string;
  readonly normal: number;
  readonly all: number;
  readonly leaseMs: number;
  readonly critical: ((req: Req) => boolean | Promise<boolean>) | undefined;
}

export function resolveShed<Req>(value: unknown, prefix: string): ShedSettings<Req> {
  checkObject(value, 'shed', '{ concurrency, reserve?, critical?, lease? }');
  rejectUnknownFields(value, SHED_FIELDS, 'shed', 'shed');
  const { concurrency, reserve = 0.2, critical, lease = '1m' } = value as Record<string, unknown>;
  checkPositiveInteger(concurrency, 'shed.concurrency');
  if (concurrency > MAX_LOG_LIMIT) {
    fail('shed.concurrency', `is ${concurrency}, but at most ${MAX_LOG_LIMIT} is allowed`);
  }
  if (typeof reserve !== 'number' || !(reserve >= 0 && reserve < 1)) {
    fail(
      'shed.reserve',
      `must be a share from 0 up to (not including) 1, got ${describe(reserve)}`,
    );
  }
  // Rounded first: (1 - 0.9) × 10 is 0.9999999999999998 in floating point, and means 1.
  const normal = Math.floor(Math.round((1 - reserve) * concurrency * 1e9) / 1e9);
  if (normal < 1) {
    fail('shed.reserve', `leaves no slot of ${concurrency} for requests that are not critical`);
  }
  if (critical !== undefined) checkFunction(critical, 'shed.critical');
  const leaseMs = parseWindow(lease);
  if (leaseMs === undefined) {
    fail(
      'shed.lease',
      `must be positive whole milliseconds or a string like '30s', got ${describe(lease)}`,
    );
  }
  return {
    prefix,
    normal,
    all: concurrency,
    leaseMs,
    critical: critical as ShedSettings<Req>['critical'],
  };
}

/**
 * Counts the fleet's requests in flight with a limiter of its own over the same store, with
 * `:shed` after the prefix: one concurrency policy, whose limit is the normal share or, for a
 * critical request, all of it. Its slot is taken in the same script call as the request's own
 * policies where one call can take both (see RequestChecks), and alone, first, elsewhere. Fails
 * open: a store failure lets the request in.
 */
export class LoadShedder<Req> {
  readonly #settings: ShedSettings<Req>;
  readonly #limiter: Limiter;

  constructor(
    settings: ShedSettings<Req>,
    options: Omit<LimiterOptions, 'onError'>,
    onError: () => void,
    telemetry?: Telemetry,
  ) {
    this.#settings = settings;
    const { observe } = options;
    const policy = (slots: number) => ({
      name: 'fleet',
      concurrency: slots,
      lease: settings.leaseMs,
    });
    this.#limiter = createLimiter({
      ...storeOptionsOf(options),
      // Its decisions are observed under their own tiers, apart from the identities'.
      ...(observe !== undefined && { observe }),
      // Its refusals are the requests shed.
      ...(telemetry !== undefined && { [TELEMETRY]: telemetry.forShedding() }),
      prefix: `${settings.prefix}:shed`,
      tiers: { [NORMAL]: policy(settings.normal), [CRITICAL]: policy(settings.all) },
      defaultTier: NORMAL,
      onStoreError: 'allow',
      onError,
    });
  }

  /** Whether `req` may use the reserve: false when `critical` throws, which is reported. */
  async isCritical(req: Req, report: (error: unknown) => void): Promise<boolean> {
    const { critical } = this.#settings;
    if (critical === undefined) return false;
    try {
      return (await critical(req)) === true;
    } catch (error) {
      report(error);
      return false;
    }
  }

  /** A slot of the fleet's made ready to be taken in the same script call as a request's own. */
  leg(critical: boolean): Leg {
    return legsOf(this.#limiter).prepare(FLEET, { tier: critical ? CRITICAL : NORMAL }) as Leg;
  }

  /** Takes a slot of the fleet's alone: the decision, which holds it if admitted. */
  async acquire(critical: boolean, report: (error: unknown) => void): Promise<Decision> {
    const decision = await this.#limiter.consume(FLEET, { tier: critical ? CRITICAL : NORMAL });
    if (decision.error) report(decision.error);
    return decision;
  }

  release(decision: Decision, report: (error: unknown) => void): void {
    this.#limiter.release(decision).catch(report);
  }

  close(): Promise<void> {
    return this.#limiter.close();
  }
}
