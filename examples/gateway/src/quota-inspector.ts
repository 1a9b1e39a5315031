// Reads and resets an API key's quotas through the very limiters the gateway's routes count with.
import {
  type ApiKeyIdentifier,
  type Decision,
  formatWindow,
  storageIdentity,
} from '@sentinel/core';
import type { SentinelLimiters } from '@sentinel/fastify';
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
  /** The plugin's limiters, `app.sentinel`: its own, and one per route group. */
  limiters: SentinelLimiters;
  /** The names of the configured tiers, for the status page. */
  tierNames: readonly string[];
  /** The identifier the request path runs for API keys: it names a key's identity. */
  identifyApiKey: ApiKeyIdentifier;
}

/** A key's state is ambiguous while the store fails: the inspector says so rather than guess. */
export class StoreUnavailableError extends Error {
  override name = 'StoreUnavailableError';
}

/**
 * Peeks and resets through the plugin's own limiters, so that it reads the keys requests write,
 * by construction: the same store and client, prefix, tiers and groups. The limiters of the
 * groups are read when asked for, since the routes that make them are added after this.
 */
export class QuotaInspector {
  readonly #limiters: SentinelLimiters;
  readonly #tierNames: readonly string[];
  readonly #identifyApiKey: ApiKeyIdentifier;
  #tiers: Promise<TierView[]> | undefined;

  constructor({ limiters, tierNames, identifyApiKey }: QuotaInspectorOptions) {
    this.#limiters = limiters;
    this.#tierNames = tierNames;
    this.#identifyApiKey = identifyApiKey;
  }

  /** The key's quotas now, or undefined for a key nobody issued. */
  async quota(apiKey: string): Promise<Quota | undefined> {
    const identity = await this.#identityOf(apiKey);
    if (identity === undefined) return undefined;
    // What the request path consumes with: the tier, and a tenant's own policies if it has them.
    const options = { tier: identity.tier, policies: identity.policies };
    const groups = this.#limiters.groups;
    const [main, ...grouped] = await Promise.all([
      this.#limiters.limiter.peek(identity.key, options),
      ...[...groups.values()].map((limiter) => limiter.peek(identity.key, options)),
    ]);
    const groupNames = [...groups.keys()];
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
    const limiters = [this.#limiters.limiter, ...this.#limiters.groups.values()];
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
        const decision = await this.#limiters.limiter.peek('status-page', { tier: name });
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

  /** The identity the request path gives this key, found by the request path's own identifier. */
  async #identityOf(apiKey: string) {
    const found = await this.#identifyApiKey.identityOf(apiKey);
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
