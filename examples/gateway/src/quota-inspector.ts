// Reads and resets an API key's quotas in the state the gateway's limits keep: same store, prefix, tiers, groups.
import {
  createHttpLimiter,
  type Decision,
  formatWindow,
  type Identifier,
  type Limiter,
  type Logger,
  type RedisClient,
  storageIdentity,
} from '@sentinel/core';
import type { LimiterSettings } from './config.ts';
import { identityDigest } from './decision-stats.ts';

/** One policy's quota, as the admin routes answer it. */
export interface PolicyQuota {
  policy: string;
  limit: number;
  remaining: number;
  resetMs: number;
}

export interface Quota {
  /** The digest the status page shows for this identity, never the key. */
  identity: string;
  tier: string | undefined;
  /** The budget every route without a group of its own counts against. */
  policies: PolicyQuota[];
  /** The budget of each route group. */
  groups: Record<string, PolicyQuota[]>;
}

/** A tier and its policies as Sentinel resolved them: names filled in, windows in ms. */
export interface TierView {
  name: string;
  policies: { policy: string; limit: number; window: string; algorithm: string }[];
}

export interface QuotaInspectorOptions {
  limiter: LimiterSettings;
  redis: RedisClient | undefined;
  /** The groups of the configured routes. */
  groups: readonly string[];
  /** The identifier the request path runs for API keys, and the header it reads them from. */
  identifyApiKey: Identifier;
  apiKeyHeader: string;
  logger: Logger;
}

/** A key's state is ambiguous while the store fails: the inspector says so rather than guess. */
export class StoreUnavailableError extends Error {
  override name = 'StoreUnavailableError';
}

/**
 * The plugin keeps its limiters to itself, so the inspector builds its own over the same
 * options: the same store (the process's shared memory store, or the same Redis client), prefix,
 * tiers and groups give the same keys, and so the same state. It has no observers, so its peeks
 * are not counted as traffic.
 */
export class QuotaInspector {
  readonly #main: Limiter;
  readonly #groups: ReadonlyMap<string, Limiter>;
  readonly #tierNames: readonly string[];
  readonly #identify: (apiKey: string) => ReturnType<Identifier>;
  readonly #close: () => Promise<unknown>;
  #tiers: Promise<TierView[]> | undefined;

  constructor({
    limiter,
    redis,
    groups,
    identifyApiKey,
    apiKeyHeader,
    logger,
  }: QuotaInspectorOptions) {
    // `headers` belongs to the HTTP layer; the rest decides which keys hold a key's state.
    const { tiers, defaultTier, prefix, timeout } = limiter;
    const build = (group?: string) =>
      createHttpLimiter({
        tiers,
        defaultTier,
        prefix,
        ...(redis && { timeout }),
        redis,
        group,
        logger,
      });
    const main = build();
    const byGroup = new Map(groups.map((group) => [group, build(group)]));
    this.#main = main.limiter;
    this.#groups = new Map([...byGroup].map(([group, http]) => [group, http.limiter]));
    this.#tierNames = Object.keys(tiers ?? {});
    this.#identify = (apiKey) => identifyApiKey({ headers: { [apiKeyHeader]: apiKey } });
    this.#close = () => Promise.all([main, ...byGroup.values()].map((http) => http.close()));
  }

  /** The key's quotas now, or undefined for a key nobody issued. */
  async quota(apiKey: string): Promise<Quota | undefined> {
    const identity = await this.#identityOf(apiKey);
    if (identity === undefined) return undefined;
    // What the request path consumes with: the tier, and a tenant's own policies if it has them.
    const options = { tier: identity.tier, policies: identity.policies };
    const [main, ...grouped] = await Promise.all([
      this.#main.peek(identity.key, options),
      ...[...this.#groups.values()].map((limiter) => limiter.peek(identity.key, options)),
    ]);
    const groupNames = [...this.#groups.keys()];
    return {
      identity: identityDigest(storageIdentity(identity.key)),
      tier: (main as Decision).tier,
      policies: policyQuotas(main as Decision),
      groups: Object.fromEntries(
        grouped.map((decision, i) => [groupNames[i] as string, policyQuotas(decision)]),
      ),
    };
  }

  /** Deletes the key's state in every budget; false for a key nobody issued. */
  async reset(apiKey: string): Promise<boolean> {
    const identity = await this.#identityOf(apiKey);
    if (identity === undefined) return false;
    const options = { tier: identity.tier, policies: identity.policies };
    const limiters = [this.#main, ...this.#groups.values()];
    await Promise.all(limiters.map((limiter) => limiter.reset(identity.key, options)));
    return true;
  }

  /**
   * The tiers with their policies as resolved, read once from a peek's decision: it carries
   * each policy's name, default ones included, even when the store is down.
   */
  tiers(): Promise<TierView[]> {
    this.#tiers ??= Promise.all(
      this.#tierNames.map(async (name) => {
        const decision = await this.#main.peek('status-page', { tier: name });
        return {
          name,
          policies: decision.policies.map((p) => ({
            policy: p.policy,
            limit: p.limit,
            window: formatWindow(p.windowMs),
            algorithm: p.algorithm,
          })),
        };
      }),
    );
    return this.#tiers;
  }

  close(): Promise<unknown> {
    return this.#close();
  }

  /** The identity the request path gives this key, found by the request path's own identifier. */
  async #identityOf(apiKey: string) {
    const found = await this.#identify(apiKey);
    if (found === null || found === undefined || found === 'unauthorized') return undefined;
    return found;
  }
}

/** Each policy's quota; a decision the failure mode made knows none. */
function policyQuotas(decision: Decision): PolicyQuota[] {
  if (decision.degraded !== undefined) {
    throw new StoreUnavailableError('the store did not answer: the quota is unknown');
  }
  return decision.policies.map(({ policy, limit, remaining, resetMs }) => ({
    policy,
    limit,
    remaining,
    resetMs,
  }));
}
