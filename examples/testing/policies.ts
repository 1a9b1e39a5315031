// The limits of the example API, the same in its Express, Koa and Fastify versions.
import type { ApiKeyTenant, PolicyOptions, TierOptions } from '@sentinel/core';

/** FREE by client IP or a FREE key; PRO and ENTERPRISE by a key their tenant was issued. */
export const TIERS: Record<string, TierOptions> = {
  FREE: { name: 'free-minute', limit: 10, window: '1m' },
  PRO: [
    { name: 'pro-minute', limit: 100, window: '1m' },
    { name: 'pro-burst', limit: 20, window: '1s', algorithm: 'gcra' },
  ],
  ENTERPRISE: { name: 'enterprise-minute', limit: 1000, window: '1m' },
};

/** Five login attempts per 15 minutes; the sixth puts the client in a penalty box for an hour. */
export const LOGIN: PolicyOptions = {
  name: 'login',
  limit: 5,
  window: '15m',
  algorithm: 'fixed-window',
  blockFor: '1h',
};

/** One export at a time per client; a slot its request never gives back lapses after 30 s. */
export const EXPORTS = { concurrency: 1, lease: '30s' } as const;

/** Stands in for your database of issued keys. */
const ISSUED: Record<string, ApiKeyTenant> = {
  'pro-key': { tenant: 'globex', tier: 'PRO' },
  'enterprise-key': { tenant: 'initech', tier: 'ENTERPRISE' },
};

export async function findApiKey(key: string): Promise<ApiKeyTenant | null> {
  return ISSUED[key] ?? null;
}
