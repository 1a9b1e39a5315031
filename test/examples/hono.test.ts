// The Hono example and its plain fetch handler, run as a user runs them on Node, Bun and Deno: FREE
// stops at 10 a minute, a PRO key gets its tier, and on one Redis the runtimes share one budget.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { runtimeBinary } from '../harness/runtimes.ts';

const EXAMPLE = fileURLToPath(new URL('../../examples/hono', import.meta.url));

/** How each runtime runs a file of the example, as its README says. */
const RUNTIMES = {
  node: (file: string): [string, string[]] => [process.execPath, ['--import', 'tsx', file]],
  bun: (file: string): [string, string[]] => [runtimeBinary('bun'), [file]],
  deno: (file: string): [string, string[]] => [runtimeBinary('deno'), ['run', '--allow-all', file]],
};
type RuntimeName = keyof typeof RUNTIMES;

const running: ChildProcess[] = [];
afterEach(() => {
  for (const child of running.splice(0)) child.kill('SIGKILL');
});

/** Starts `file` on `runtime` on a free port; resolves with its base URL once it prints it. */
async function start(
  runtime: RuntimeName,
  file: string,
  env: Record<string, string | undefined>,
): Promise<string> {
  const [command, args] = RUNTIMES[runtime](file);
  const child = spawn(command, args, {
    cwd: EXAMPLE,
    env: { ...env, PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.push(child);
  let printed = '';
  let errors = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    errors += chunk;
  });
  child.stdout.setEncoding('utf8');
  while (!printed.includes('Try:')) {
    const [chunk] = await Promise.race([
      once(child.stdout, 'data'),
      once(child, 'exit').then(() => {
        throw new Error(`${runtime} ${file} exited: ${errors}`);
      }),
    ]);
    printed += chunk;
  }
  const port = /localhost:(\d+)/.exec(printed)?.[1];
  expect(printed).toContain(
    runtime === 'node' ? 'on Node' : runtime === 'bun' ? 'on Bun' : 'on Deno',
  );
  return `http://127.0.0.1:${port}`;
}

const statuses = async (url: string, times: number, headers: Record<string, string> = {}) => {
  const seen: number[] = [];
  for (let i = 0; i < times; i++) seen.push((await fetch(url, { headers })).status);
  return seen;
};

const { REDIS_URL: _, ...inMemory } = process.env;

describe.each(Object.keys(RUNTIMES) as RuntimeName[])('on %s', (runtime) => {
  it('the Hono app admits FREE 10 a minute, and a PRO key by its tier', async () => {
    const url = await start(runtime, 'index.ts', inMemory);
    expect(await statuses(url, 11)).toEqual([...Array(10).fill(200), 429]);
    const pro = await fetch(url, { headers: { 'x-api-key': 'pro-key' } });
    expect(pro.status).toBe(200);
    expect(await pro.json()).toEqual({ hello: 'world', tier: 'PRO', remaining: 19 });
    expect(pro.headers.get('ratelimit')).toMatch(/^"pro-burst";r=19;t=\d+$/);
  });

  it('the fetch handler admits 10 a minute by client IP, then answers the problem', async () => {
    const url = await start(runtime, 'fetch.ts', inMemory);
    expect(await statuses(url, 10)).toEqual(Array(10).fill(200));
    const refused = await fetch(url);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('content-type')).toBe('application/problem+json');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
  });
});

it('shares one budget between the Hono app on Node, Bun and Deno on one Redis', async () => {
  // The run's own Redis, which no other test writes this client's address to.
  const env = { ...inMemory, REDIS_URL: inject('redisUrl'), TRUST_PROXY: '1' };
  const urls = await Promise.all(
    (Object.keys(RUNTIMES) as RuntimeName[]).map((runtime) => start(runtime, 'index.ts', env)),
  );
  // Behind one proxy (TRUST_PROXY=1), as the three instances would be behind a load balancer.
  const client = { 'x-forwarded-for': '198.51.100.77' };
  const seen: number[] = [];
  for (let i = 0; i < 12; i++)
    seen.push((await fetch(urls[i % 3] as string, { headers: client })).status);
  expect(seen).toEqual([...Array(10).fill(200), 429, 429]);
});
