// The published packages: packed as npm would, installed into a fresh project with npm, then
// imported from CommonJS, ESM and TypeScript.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = new URL('..', import.meta.url).pathname;
const PACKAGES = {
  core: 'createLimiter',
  express: 'rateLimit',
  koa: 'rateLimit',
  fastify: 'sentinel',
} as const;
let consumer: string;

const USE_CORE = `
const limiter = createLimiter({ limit: 2, window: '1m' });
const decisions = [];
for (let i = 0; i < 3; i++) decisions.push((await limiter.consume('a')).allowed);
await limiter.close();
console.log(JSON.stringify({ decisions, algorithms: ALGORITHMS.length, store: typeof MemoryStore }));
`;

beforeAll(async () => {
  for (const name of Object.keys(PACKAGES)) {
    if (!existsSync(join(root, `packages/${name}/dist/index.mjs`))) {
      throw new Error(
        `packages/${name}/dist is missing: run \`pnpm build\` first (\`pnpm test\` does)`,
      );
    }
  }
  consumer = await mkdtemp(join(tmpdir(), 'sentinel-consumer-'));
  for (const name of Object.keys(PACKAGES)) {
    await run('pnpm', ['pack', '--pack-destination', consumer], {
      cwd: join(root, `packages/${name}`),
    });
  }
  const tarballs = (await readdir(consumer)).filter((file) => file.endsWith('.tgz'));
  await writeFile(join(consumer, 'package.json'), '{ "name": "consumer", "private": true }');
  // npm resolves the packages' own dependencies and peers the way a user's install would.
  await run(
    'npm',
    ['install', '--no-audit', '--no-fund', '--prefer-offline', ...tarballs.map((t) => `./${t}`)],
    {
      cwd: consumer,
    },
  );
  await writeFile(
    join(consumer, 'core.mjs'),
    `import { createLimiter, ALGORITHMS, MemoryStore } from '@sentinel/core';\n${USE_CORE}`,
  );
  await writeFile(
    join(consumer, 'core.cjs'),
    `const { createLimiter, ALGORITHMS, MemoryStore } = require('@sentinel/core');\n(async () => {${USE_CORE}})();`,
  );
  for (const [name, entry] of Object.entries(PACKAGES)) {
    if (name === 'core') continue;
    const check = `console.log(typeof ${entry} + ' ' + typeof byApiKey + ' ' + typeof RedisStore);`;
    await writeFile(
      join(consumer, `${name}.mjs`),
      `import { ${entry}, byApiKey, RedisStore } from '@sentinel/${name}';\n${check}`,
    );
    await writeFile(
      join(consumer, `${name}.cjs`),
      `const { ${entry}, byApiKey, RedisStore } = require('@sentinel/${name}');\n${check}`,
    );
  }
  const typed = `import { createLimiter, type Decision, type LimiterOptions } from '@sentinel/core';
const options: LimiterOptions = { tiers: { FREE: { limit: 10, window: '1m' } } };
const decision: Promise<Decision> = createLimiter(options).consume('key', { tier: 'FREE' });
export { decision };
`;
  await writeFile(join(consumer, 'typed.mts'), typed);
  await writeFile(join(consumer, 'typed.cts'), typed);
}, 180_000);

afterAll(async () => {
  if (consumer) await rm(consumer, { recursive: true, force: true });
});

describe('the packed packages', () => {
  it.each(Object.keys(PACKAGES))(
    'ship only dist and the manifest for @sentinel/%s',
    async (name) => {
      const files = await readdir(join(consumer, `node_modules/@sentinel/${name}/dist`));
      expect(files.sort()).toEqual(['index.cjs', 'index.d.cts', 'index.d.mts', 'index.mjs']);
    },
  );

  it.each(['core.mjs', 'core.cjs'])('run the core from %s', async (file) => {
    const { stdout } = await run(process.execPath, [file], { cwd: consumer });
    expect(JSON.parse(stdout)).toEqual({
      decisions: [true, true, false],
      algorithms: 5,
      store: 'function',
    });
  });

  it.each(['express', 'koa', 'fastify'].flatMap((name) => [`${name}.mjs`, `${name}.cjs`]))(
    'load the adapter and its re-exports from %s',
    async (file) => {
      const { stdout } = await run(process.execPath, [file], { cwd: consumer });
      expect(stdout.trim()).toBe('function function function');
    },
  );

  it.each(['typed.mts', 'typed.cts'])('have types that resolve from %s', async (file) => {
    const tsc = join(root, 'node_modules/typescript/bin/tsc');
    const args = [
      '--noEmit',
      '--strict',
      '--module',
      'node16',
      '--moduleResolution',
      'node16',
      file,
    ];
    const result = await run(process.execPath, [tsc, ...args], { cwd: consumer }).catch(
      (error: { stdout: string }) => error,
    );
    expect(result.stdout).toBe('');
  });
});
