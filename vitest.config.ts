// One vitest run for the whole monorepo: package suites beside their code, cross-package suites in test/.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['packages/*/test/**/*.test.ts', 'test/**/*.test.ts'],
    globalSetup: ['test/harness/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Suites start and stop their own Redis processes; two cores are plenty for two workers.
    maxWorkers: 2,
  },
});
