// The NestJS example, built and started as `pnpm start` does it: tiers, 429s, a skipped route, and
// logins counted per IP before the password guard and accounts per user after the session guard.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';

const EXAMPLE = fileURLToPath(new URL('../../examples/nestjs', import.meta.url));
const PROBLEM = 'application/problem+json; charset=utf-8';

/** The two halves of the `start` script: `pnpm run build` (`tsc ...`), then `node ...`. */
function startScript(): { build: string[]; run: string[] } {
  const { scripts } = JSON.parse(readFileSync(join(EXAMPLE, 'package.json'), 'utf8'));
  const [build, run] = String(scripts.start).split(' && ');
  expect(build).toBe('pnpm run build');
  const [tsc, ...buildArgs] = String(scripts.build).split(' ');
  expect(tsc).toBe('tsc');
  const [node, ...runArgs] = String(run).split(' ');
  expect(node).toBe('node');
  return { build: buildArgs, run: runArgs };
}

let script: { build: string[]; run: string[] };
const running: ChildProcess[] = [];

beforeAll(() => {
  script = startScript();
  const tsc = createRequire(join(EXAMPLE, 'package.json')).resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, ...script.build], { cwd: EXAMPLE, stdio: 'inherit' });
});

afterAll(() => {
  for (const child of running.splice(0)) child.kill('SIGKILL');
});

/** Starts the built example on a free port; resolves with its base URL once its banner is out. */
async function start(env: Record<string, string | undefined>): Promise<string> {
  const child = spawn(process.execPath, script.run, {
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
  const exited = once(child, 'exit').then(() => {
    throw new Error(`the example exited: ${errors}`);
  });
  // Killed after the test, it rejects unheard.
  exited.catch(() => {});
  // The banner ends with the login's curl line.
  while (!printed.includes('battery staple')) {
    const [chunk] = await Promise.race([once(child.stdout, 'data'), exited]);
    printed += chunk;
  }
  // Nest logs to stdout: keep reading, so that a full pipe never stalls the app.
  child.stdout.resume();
  const port = /localhost:(\d+)/.exec(printed)?.[1];
  expect(printed).toContain(`curl -i localhost:${port}/ -H 'x-api-key: pro-key'`);
  return `http://127.0.0.1:${port}`;
}

/** A client at `ip`: the example trusts X-Forwarded-For from loopback, as from a local proxy. */
const from = (ip: string, headers: Record<string, string> = {}) => ({
  'x-forwarded-for': ip,
  ...headers,
});

const statuses = async (url: string, times: number, headers: Record<string, string>) => {
  const seen: number[] = [];
  for (let i = 0; i < times; i++) seen.push((await fetch(url, { headers })).status);
  return seen;
};

const { REDIS_URL: _, ...inMemory } = process.env;

describe('in memory', () => {
  let url: string;
  beforeAll(async () => {
    url = await start(inMemory);
  });

  const login = (ip: string, account: string, password: string) =>
    fetch(`${url}/login`, {
      method: 'POST',
      headers: from(ip, { 'content-type': 'application/json' }),
      body: JSON.stringify({ account, password }),
    });
  const logins = async (ip: string, password: string, times: number) => {
    const seen: number[] = [];
    for (let i = 0; i < times; i++) seen.push((await login(ip, 'alice', password)).status);
    return seen;
  };
  const RIGHT = 'correct horse battery staple';

  it('admits FREE 10 a minute by client IP, then answers 429 with the problem, Retry-After and the RateLimit headers', async () => {
    const client = from('192.0.2.10');
    const first = await fetch(url, { headers: client });
    expect(first.status).toBe(200);
    expect(await first.json()).toEqual({ tier: 'FREE', remaining: 9 });
    expect(first.headers.get('ratelimit-policy')).toBe('"free-minute";q=10;w=60');
    expect(first.headers.get('ratelimit')).toMatch(/^"free-minute";r=9;t=\d+$/);
    expect(await statuses(url, 9, client)).toEqual(Array(9).fill(200));

    const refused = await fetch(url, { headers: client });
    expect(refused.status).toBe(429);
    expect(refused.headers.get('content-type')).toBe(PROBLEM);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(refused.headers.get('ratelimit')).toMatch(/^"free-minute";r=0;t=\d+$/);
    expect(await refused.json()).toMatchObject({
      type: 'https://iana.org/assignments/http-problem-types#quota-exceeded',
      status: 429,
      'violated-policies': ['free-minute'],
    });
    // Another client has its own budget.
    expect((await fetch(url, { headers: from('192.0.2.20') })).status).toBe(200);
  });

  it('gives a PRO key its tier, and answers an unknown key 401 with a problem', async () => {
    const pro = await fetch(url, { headers: from('192.0.2.11', { 'x-api-key': 'pro-key' }) });
    expect(pro.status).toBe(200);
    expect(await pro.json()).toEqual({ tier: 'PRO', remaining: 19 });
    expect(pro.headers.get('ratelimit')).toMatch(/^"pro-burst";r=19;t=\d+$/);

    const unknown = await fetch(url, { headers: from('192.0.2.11', { 'x-api-key': 'no-such' }) });
    expect(unknown.status).toBe(401);
    expect(unknown.headers.get('content-type')).toBe(PROBLEM);
  });

  it("charges a search, @RateLimit({ cost: 5 }), five units of the tier's budget", async () => {
    const client = from('192.0.2.12');
    const search = () => fetch(`${url}/search`, { headers: client });
    expect(await (await search()).json()).toEqual({ results: [], remaining: 5 });
    expect(await (await search()).json()).toEqual({ results: [], remaining: 0 });
    expect((await search()).status).toBe(429);
    // The same budget as the module's other routes.
    expect((await fetch(url, { headers: client })).status).toBe(429);
  });

  it('never limits the @SkipRateLimit() health check, and sends it no RateLimit headers', async () => {
    const client = from('192.0.2.13');
    expect(await statuses(url, 11, client)).toEqual([...Array(10).fill(200), 429]);
    for (let i = 0; i < 3; i++) {
      const health = await fetch(`${url}/health`, { headers: client });
      expect(health.status).toBe(200);
      expect(health.headers.get('ratelimit')).toBeNull();
    }
  });

  it('counts each login by IP before the password guard: 5 wrong passwords, then 429 even for the right one', async () => {
    // Right passwords, however many, are given back once answered.
    expect(await logins('192.0.2.14', RIGHT, 8)).toEqual(Array(8).fill(200));
    expect(await logins('192.0.2.14', 'guess', 6)).toEqual([401, 401, 401, 401, 401, 429]);
    const locked = await login('192.0.2.14', 'alice', RIGHT);
    expect(locked.status).toBe(429);
    expect(locked.headers.get('content-type')).toBe(PROBLEM);
    expect(Number(locked.headers.get('retry-after'))).toBeGreaterThan(0);
    // Per IP: another address still reaches the password check.
    expect((await login('192.0.2.15', 'alice', 'guess')).status).toBe(401);
  });

  it('limits each signed-in user 3 a minute after the session guard, from whichever address', async () => {
    const tokenOf = async (ip: string, account: string, password: string) =>
      ((await (await login(ip, account, password)).json()) as { token: string }).token;
    const alice = await tokenOf('192.0.2.16', 'alice', RIGHT);
    const bob = await tokenOf('192.0.2.16', 'bob', 'hunter2 hunter2');
    const account = (ip: string, token: string) =>
      fetch(`${url}/account`, { headers: from(ip, { authorization: `Bearer ${token}` }) });

    const first = await account('192.0.2.17', alice);
    expect(await first.json()).toEqual({ user: 'alice', remaining: 2 });
    expect(first.headers.get('ratelimit-policy')).toBe('"3-per-1m";q=3;w=60');
    expect((await account('192.0.2.18', alice)).status).toBe(200);
    expect((await account('192.0.2.19', alice)).status).toBe(200);
    const refused = await account('192.0.2.17', alice);
    expect(refused.status).toBe(429);
    expect(await refused.json()).toMatchObject({ 'violated-policies': ['3-per-1m'] });
    // Bob, from the same address as Alice, has his own budget.
    expect(await (await account('192.0.2.17', bob)).json()).toEqual({ user: 'bob', remaining: 2 });
    // Without a session, the session guard answers before Sentinel's guard runs.
    expect((await fetch(`${url}/account`, { headers: from('192.0.2.17') })).status).toBe(401);
  });
});

// Two Nest processes starting at once under tsx take a while on a loaded 2-core machine.
it('shares one budget between two instances on one Redis', { timeout: 60_000 }, async () => {
  const env = { ...inMemory, REDIS_URL: inject('redisUrl') };
  const urls = await Promise.all([start(env), start(env)]);
  // An address no other suite counts under the default prefix.
  const client = from('192.0.2.142');
  const seen: number[] = [];
  for (let i = 0; i < 12; i++) {
    seen.push((await fetch(urls[i % 2] as string, { headers: client })).status);
  }
  expect(seen).toEqual([...Array(10).fill(200), 429, 429]);
});
