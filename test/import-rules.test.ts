// The import rules `pnpm lint` checks: each is broken once in a fixture tree and reported by name.
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = new URL('..', import.meta.url).pathname;
const CONFIG = join(root, '.dependency-cruiser.cjs');
const DEPCRUISE = join(root, 'node_modules/dependency-cruiser/bin/dependency-cruise.mjs');
const FIXTURE = join(root, 'test/fixtures/import-rules');

/** Each fixture file that breaks a rule, and the rule. Every other fixture file breaks none. */
const BROKEN = [
  ['packages/express/src/uses-koa.ts', 'adapters-not-to-each-other'],
  ['packages/core/src/limiter/uses-adapter.ts', 'core-not-to-adapters'],
  ['packages/core/src/limiter/uses-ioredis.ts', 'redis-client-only-in-redis-store'],
  ['packages/core/src/http/loads-redis.ts', 'redis-client-only-in-redis-store'],
  ['packages/core/src/limiter/creates-require.ts', 'module-loader-only-in-redis-store'],
  ['packages/core/src/http/uses-store.ts', 'http-not-to-stores'],
  ['packages/core/src/limiter/uses-http.ts', 'limiter-not-to-http'],
  ['packages/core/src/stores/memory/uses-observer.ts', 'stores-not-to-upper-layers'],
  ['packages/core/src/stores/memory/uses-redis-store.ts', 'stores-not-to-each-other'],
  ['packages/core/src/observe/uses-limiter.ts', 'observe-only-to-shared'],
  ['packages/core/src/algorithms/uses-npm.ts', 'algorithms-only-to-shared'],
  ['packages/core/src/algorithms/uses-store-keys.ts', 'algorithms-only-to-shared'],
  ['packages/core/src/shared/uses-algorithms.ts', 'shared-not-to-core'],
  ['packages/core/src/limiter/uses-entry-point.ts', 'layers-not-to-entry-points'],
  ['packages/core/src/limiter/cycle-a.ts', 'no-circular'],
  ['packages/core/src/stores/redis/type-cycle-a.ts', 'no-circular'],
  ['packages/koa/src/uses-dev-dep.ts', 'not-to-dev-dep'],
  ['packages/fastify/src/index.ts', 'no-non-package-json'],
  ['packages/core/src/shared/uses-missing.ts', 'not-to-unresolvable'],
  ['packages/core/src/shared/dead.ts', 'no-unreachable-modules'],
] as const;

interface Cruise {
  exitCode: number;
  /** `file rule` for each violation, sorted. */
  violations: string[];
}

/**
 * Runs depcruise over `packages` in `cwd` as `pnpm lint` does, with the repository's config and
 * its default report: one `error <rule>: <file> → <import>` line for each violation, and an exit
 * code that counts them.
 */
async function cruise(cwd: string): Promise<Cruise> {
  const { exitCode, stdout } = await run(
    process.execPath,
    [DEPCRUISE, '--config', CONFIG, 'packages'],
    { cwd, env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' } },
  ).then(
    ({ stdout }) => ({ exitCode: 0, stdout }),
    (error: { code?: unknown; stdout?: string }) => {
      if (typeof error.code !== 'number' || error.stdout === undefined) throw error;
      return { exitCode: error.code, stdout: error.stdout };
    },
  );
  const lines = stdout.matchAll(/^\s*error (\S+): (\S+)/gm);
  const violations = [...lines].map(([, rule, file]) => `${file} ${rule}`);
  return { exitCode, violations: violations.sort() };
}

describe('import rules (.dependency-cruiser.cjs)', () => {
  let fixture: Cruise;
  let packages: Cruise;

  beforeAll(async () => {
    [fixture, packages] = await Promise.all([cruise(FIXTURE), cruise(root)]);
  });

  it('reports each broken rule by name, for the file that breaks it, and nothing else', () => {
    expect(fixture.violations).toEqual(BROKEN.map(([file, rule]) => `${file} ${rule}`).sort());
    expect(fixture.exitCode).toBe(BROKEN.length);
  });

  it('has a file in the fixture that breaks each rule of the config', () => {
    const config = createRequire(import.meta.url)(CONFIG) as { forbidden: { name: string }[] };
    const rules = config.forbidden.map(({ name }) => name);
    expect(new Set(BROKEN.map(([, rule]) => rule))).toEqual(new Set(rules));
  });

  it('lets the Redis store load ioredis, and an adapter import core', () => {
    const files = fixture.violations.map((violation) => violation.split(' ')[0]);
    expect(files).not.toContain('packages/core/src/stores/redis/client.ts');
    expect(files).not.toContain('packages/express/src/index.ts');
  });

  it('passes the packages as they are', () => {
    expect(packages.violations).toEqual([]);
    expect(packages.exitCode).toBe(0);
  });
});
