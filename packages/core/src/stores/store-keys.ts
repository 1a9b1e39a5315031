// The keys of one identity under a plan, and the request that spells them out only when read.
import type { Plan } from '../shared/plan.ts';
import type { StoreReply, StoreRequest } from '../shared/types.ts';

/** What a request with no release or renewal yet waits for: nothing. */
const NO_TURN: Promise<unknown> = Promise.resolve();

/** Hears of a reply that came after the store had given up on `request` (see StoreRequest.late). */
export type LateReplyListener = (request: IdentityRequest, reply: StoreReply) => void;

/**
 * The store keys of a plan under a prefix: `<prefix>:{<identity>}<suffix>`, one per policy, all
 * under the identity's hash tag. A key's namespace is the key with its identity cut out,
 * `<prefix>:{}<suffix>`, which the memory store files state under.
 */
export class KeyLayout {
  readonly namespaces: readonly string[];

  constructor(
    readonly prefix: string,
    readonly plan: Plan,
    namespaces?: readonly string[],
  ) {
    this.namespaces = namespaces ?? plan.keySuffixes.map((suffix) => `${prefix}:{}${suffix}`);
  }

  keysOf(identity: string): string[] {
    const base = `${this.prefix}:{${identity}}`;
    return this.plan.keySuffixes.map((suffix) => base + suffix);
  }
}

/**
 * The keys of one consume for several identities: each policy's, and its box's, under the
 * identity given for it, as each identity's own consume of that policy would name them, so the
 * two count against one budget. Each policy's prefix is the one prefix given, or its own when
 * the policies come from limiters with different prefixes (see StoreCalls.decideBeside). Built
 * per call: the identities are the call's.
 */
export class JointLayout extends KeyLayout {
  /** The identity of each key, in key order: the memory store files state by it. */
  readonly identities: readonly string[];
  readonly #keys: string[];

  constructor(prefix: string | readonly string[], plan: Plan, perPolicy: readonly string[]) {
    const { policies, keySuffixes } = plan;
    // Boxes' keys follow the policies' in policy order, each under its policy's prefix.
    const boxedAt = policies.flatMap((p, i) => (p.blockForMs > 0 ? [i] : []));
    const byPolicy = (values: readonly string[]) => [
      ...values,
      ...boxedAt.map((i) => values[i] as string),
    ];
    const prefixes = typeof prefix === 'string' ? undefined : byPolicy(prefix as readonly string[]);
    const prefixAt = (i: number) => (prefixes === undefined ? prefix : prefixes[i]) as string;
    super(
      prefixAt(0),
      plan,
      keySuffixes.map((suffix, i) => `${prefixAt(i)}:{}${suffix}`),
    );
    this.identities = byPolicy(perPolicy);
    this.#keys = keySuffixes.map(
      (suffix, i) => `${prefixAt(i)}:{${this.identities[i] as string}}${suffix}`,
    );
  }

  override keysOf(): string[] {
    return this.#keys;
  }
}

/**
 * A request for the keys of one identity, which spells them out only when a store reads `keys`:
 * the memory store finds state by identity and namespace, without building and hashing the
 * long key strings, which cost more than the rest of a decision in memory.
 */
export class IdentityRequest implements StoreRequest {
  /**
   * Unix ms when the limiter handed it to a store, read once for the breaker and the memory
   * store alike: Date.now() costs about 50 ns, a tenth of a decision in memory. NaN until sent.
   */
  sentAt = Number.NaN;
  /** A penalty or a refund in place of a decision. */
  adjust: StoreRequest['adjust'] = undefined;
  /** A quota lease to take beside the consume, and, once answered, what the store leased. */
  quota: StoreRequest['quota'] = undefined;
  leased: StoreReply['leased'] = undefined;
  /**
   * Once an admitted consume's decision keeps it for a refund: the Unix ms the store charged it
   * at (undefined from a store that cannot say), and the units not given back yet.
   */
  chargedAt: number | undefined = undefined;
  left = 0;
  /** Once an admitted consume's decision holds concurrency slots: until they are released. */
  holds = false;
  /** The last of its releases and renewals, which the next waits for (see `inTurn`). */
  leaseTurn: Promise<unknown> = NO_TURN;
  /** For a refund made by `refund()`: the admitted consume it gives back to. */
  refundOf: IdentityRequest | undefined = undefined;
  /** The limiter that sent it, to hear of a reply that comes after the store gave up on it. */
  lateListener: LateReplyListener | undefined = undefined;
  /** Set when the limiter traces its store calls. */
  trace: StoreRequest['trace'] = undefined;
  #keys: readonly string[] | undefined;

  constructor(
    /** As storageIdentity gives it. */
    readonly identity: string,
    readonly layout: KeyLayout,
    readonly cost: number,
    readonly apply: boolean,
    readonly now: number | undefined,
  ) {}

  // Read from the plan rather than copied: a smaller request, built once per decision.
  get policies(): StoreRequest['policies'] {
    return this.layout.plan.policies;
  }

  get script(): StoreRequest['script'] {
    return this.layout.plan.script;
  }

  get args(): StoreRequest['args'] {
    return this.layout.plan.args;
  }

  get keys(): readonly string[] {
    this.#keys ??= this.layout.keysOf(this.identity);
    return this.#keys;
  }

  late(reply: StoreReply): void {
    this.lateListener?.(this, reply);
  }
}
