// One vitest run for the whole monorepo: package suites beside their code, cross-package suites in test/.
import { defineConfig } from 'vitest/config';

// Suites that race for exact counts, stop Redis or add a CPU hog of their own, all under the
// default 50 ms deadline. They run one file at a time after the rest: each sets up the load it
// means to prove the limiter against, and two of them at once on a 2-core machine would starve
// Redis itself, which no deadline can tell from a hung one.
const ALONE = [
  'packages/core/test/limiter/race.test.ts',
  'packages/core/test/limiter/login-race.test.ts',
  'packages/core/test/stores/redis-cluster.test.ts',
  'test/failure-*.test.ts',
  'test/bench-smoke.test.ts',
  'test/multi-process/*.test.ts',
  'test/cluster/*.test.ts',
  'test/faults/*.test.ts',
  'test/connections/nothing-lost.test.ts',
  'test/connections/cluster-clients.test.ts',
  'test/connections/redis-sentinel.test.ts',
  // sentinel-rls on Redis Sentinel, its master killed under load.
  'test/rls/redis-sentinel.test.ts',
  // Two gateway processes count one tenant's limit exactly on the shared Redis: a Redis slowed
  // past the deadline by the other suites' load would answer by the failure mode instead.
  'test/gateway/redis.test.ts',
];

export default defineConfig({
  test: {
    globalSetup: ['test/harness/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    projects: [
      {
        extends: true,
        test: {
          name: 'suites',
          include: ['packages/*/test/**/*.test.ts', 'test/**/*.test.ts'],
          // Test folders that are workspace packages have node_modules of their own, which link
          // back to the packages: their suites would run twice.
          exclude: [...ALONE, '**/node_modules/**'],
          maxWorkers: 2,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          // The testing guide's examples, which read REDIS_URL as a user's CI sets it.
          name: 'examples',
          include: ['examples/testing/**/*.test.ts'],
          setupFiles: ['test/harness/redis-url-env.ts'],
          maxWorkers: 2,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: 'alone',
          include: ALONE,
          fileParallelism: false,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
