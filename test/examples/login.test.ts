// The login example run as a user runs it, with the curl lines it prints: failed attempts count,
// successful ones do not, and the fifth failure puts the account and address in the box.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const EXAMPLE = fileURLToPath(new URL('../../examples/login', import.meta.url));

it('counts failed logins only, and holds the account and address for 15 minutes after the fifth', async () => {
  // In memory: the example's own process counts alone.
  const { REDIS_URL: _, ...env } = process.env;
  const child = spawn(process.execPath, ['--import', 'tsx', 'index.ts'], {
    cwd: EXAMPLE,
    env: { ...env, PORT: '0' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    let printed = '';
    child.stdout.setEncoding('utf8');
    // The banner ends with the successful login's curl line.
    while (!printed.includes('battery staple')) {
      printed += (await once(child.stdout, 'data'))[0];
    }
    const port = /localhost:(\d+)/.exec(printed)?.[1];
    const login = (password: string) =>
      fetch(`http://localhost:${port}/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ account: 'alice', password }),
      });
    const statuses = async (password: string, times: number) => {
      const seen = [];
      for (let i = 0; i < times; i++) seen.push((await login(password)).status);
      return seen;
    };
    expect(printed).toContain(`curl -i localhost:${port}/login`);
    // Successful logins, however many, leave the 5 failures untouched.
    expect(await statuses('correct horse battery staple', 8)).toEqual(Array(8).fill(200));
    expect(await statuses('guess', 6)).toEqual([401, 401, 401, 401, 401, 429]);
    // In the box: even the right password waits out the 15 minutes.
    const boxed = await login('correct horse battery staple');
    expect(boxed.status).toBe(429);
    expect(boxed.headers.get('retry-after')).toBe('900');
  } finally {
    child.kill('SIGINT');
  }
});
