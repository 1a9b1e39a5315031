// The published @sentinel/core: packed as npm would, then imported from CommonJS, ESM and TypeScript.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = new URL('..', import.meta.url).pathname;
const core = join(root, 'packages/core');
let consumer: string;

const USE = `
const limiter = createLimiter({ limit: 2, window: '1m' });
const decisions = [];
for (let i = 0; i < 3; i++) decisions.push((await limiter.consume('a')).allowed);
await limiter.close();
console.log(JSON.stringify({ decisions, algorithms: ALGORITHMS.length, store: typeof MemoryStore }));
`;

beforeAll(async () => {
  if (!existsSync(join(core, 'dist/index.mjs'))) {
    throw new Error(
      'packages/core/dist is missing: run `pnpm build` before this suite (`pnpm test` does)',
    );
  }
  consumer = await mkdtemp(join(tmpdir(), 'sentinel-consumer-'));
  await run('pnpm', ['pack', '--pack-destination', consumer], { cwd: core });
  const tarball = (await readdir(consumer)).find((name) => name.endsWith('.tgz')) as string;
  const installed = join(consumer, 'node_modules/@sentinel/core');
  await mkdir(installed, { recursive: true });
  await run('tar', ['xzf', join(consumer, tarball), '-C', installed, '--strip-components=1']);
  await writeFile(join(consumer, 'package.json'), '{ "name": "consumer", "private": true }');
  await writeFile(
    join(consumer, 'esm.mjs'),
    `import { createLimiter, ALGORITHMS, MemoryStore } from '@sentinel/core';\n${USE}`,
  );
  await writeFile(
    join(consumer, 'cjs.cjs'),
    `const { createLimiter, ALGORITHMS, MemoryStore } = require('@sentinel/core');\n(async () => {${USE}})();`,
  );
  const typed = `import { createLimiter, type Decision, type LimiterOptions } from '@sentinel/core';
const options: LimiterOptions = { tiers: { FREE: { limit: 10, window: '1m' } } };
const decision: Promise<Decision> = createLimiter(options).consume('key', { tier: 'FREE' });
export { decision };
`;
  await writeFile(join(consumer, 'typed.mts'), typed);
  await writeFile(join(consumer, 'typed.cts'), typed);
}, 60_000);

afterAll(async () => {
  if (consumer) await rm(consumer, { recursive: true, force: true });
});

describe('the packed package', () => {
  it('ships only dist and its manifest, with no TypeScript sources', async () => {
    const files = await readdir(join(consumer, 'node_modules/@sentinel/core/dist'));
    expect(files.sort()).toEqual(['index.cjs', 'index.d.cts', 'index.d.mts', 'index.mjs']);
  });

  it.each(['esm.mjs', 'cjs.cjs'])('works when loaded from %s', async (file) => {
    const { stdout } = await run(process.execPath, [file], { cwd: consumer });
    expect(JSON.parse(stdout)).toEqual({
      decisions: [true, true, false],
      algorithms: 5,
      store: 'function',
    });
  });

  it.each(['typed.mts', 'typed.cts'])('has types that resolve from %s', async (file) => {
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
