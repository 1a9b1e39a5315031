// The suites, in the order the issue lists them and RESULTS.md shows them.
import type { Suite } from '../lib/measure.ts';
import { blockCache } from './block-cache.ts';
import { concurrency } from './concurrency.ts';
import { degraded } from './degraded.ts';
import { http } from './http.ts';
import { leases } from './leases.ts';
import { memoryStore } from './memory-store.ts';
import { multiPolicy } from './multi-policy.ts';
import { nodeDecisions } from './node-decisions.ts';
import { redisCost } from './redis-cost.ts';
import { rls } from './rls.ts';
import { telemetry } from './telemetry.ts';

export const SUITES: Record<string, Suite> = {
  'redis-cost': redisCost,
  'node-decisions': nodeDecisions,
  'memory-store': memoryStore,
  http,
  leases,
  degraded,
  'multi-policy': multiPolicy,
  'block-cache': blockCache,
  concurrency,
  rls,
  telemetry,
};
