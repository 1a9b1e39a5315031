// The Hono middleware and the fetch wrapper on Node, Bun and Deno, each a process of its own on one
// Redis: a concurrency slot is held while a response streams, and comes back once it has been
// sent, when its client leaves mid-stream or mid-handler, and when the handler throws.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { uniquePrefix } from '../harness/clients.ts';
import { runtimeBinary } from '../harness/runtimes.ts';
import { waitFor } from '../harness/wait-for.ts';

const FOLDER = fileURLToPath(new URL('.', import.meta.url));

const RUNTIMES = {
  node: (): [string, string[]] => [process.execPath, ['--import', 'tsx', 'app.ts']],
  bun: (): [string, string[]] => [runtimeBinary('bun'), ['app.ts']],
  deno: (): [string, string[]] => [runtimeBinary('deno'), ['run', '--allow-all', 'app.ts']],
};
const CASES = (['hono', 'fetch'] as const).flatMap((app) =>
  (Object.keys(RUNTIMES) as (keyof typeof RUNTIMES)[]).map((runtime) => ({ app, runtime })),
);

/** Starts the app on the runtime; resolves with its base URL. */
async function start(
  app: 'hono' | 'fetch',
  runtime: keyof typeof RUNTIMES,
): Promise<{ url: string; child: ChildProcess }> {
  const [command, args] = RUNTIMES[runtime]();
  const child = spawn(command, args, {
    cwd: FOLDER,
    env: { ...process.env, APP: app, REDIS_URL: inject('redisUrl'), PREFIX: uniquePrefix(app) },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let errors = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    errors += chunk;
  });
  let out = '';
  child.stdout?.setEncoding('utf8');
  while (!out.includes('\n')) {
    const [chunk] = await Promise.race([
      once(child.stdout as NodeJS.ReadableStream, 'data'),
      once(child, 'exit').then(() => {
        throw new Error(`${app} on ${runtime} exited: ${errors}`);
      }),
    ]);
    out += chunk;
  }
  const { port } = JSON.parse(out.split('\n')[0] as string) as { port: number };
  return { url: `http://127.0.0.1:${port}`, child };
}

describe.each(CASES)('$app on $runtime', ({ app, runtime }) => {
  let url = '';
  let child: ChildProcess | undefined;
  beforeAll(async () => {
    ({ url, child } = await start(app, runtime));
  });
  afterAll(() => {
    child?.stdin?.end();
    child?.kill('SIGKILL');
  });

  let tenants = 0;
  /** A tenant of this test's own, so that one test's slot never meets another's. */
  const tenant = () => ({ 'x-tenant-id': `${app}-${runtime}-${++tenants}` });
  const status = async (headers: Record<string, string>) =>
    (await fetch(`${url}/`, { headers })).status;
  const hangingCount = async () =>
    ((await (await fetch(`${url}/hanging`)).json()) as { hanging: number }).hanging;
  const slotBack = (headers: Record<string, string>) =>
    waitFor(async () => (await status(headers)) === 200, 10_000, 'the slot to come back');

  it('holds the slot while a response streams, and gives it back once it has been sent', async () => {
    const headers = tenant();
    const streaming = await fetch(`${url}/stream`, { headers });
    expect(streaming.status).toBe(200);
    expect(streaming.headers.get('ratelimit')).toBe('"1-in-flight";r=0');
    // A second of streaming: the tenant's one slot is taken.
    expect(await status(headers)).toBe(429);
    const body = await streaming.text();
    expect(body.split('\n').filter(Boolean)).toHaveLength(20);
    await slotBack(headers);
  });

  it('gives the slot back when the client leaves mid-stream', async () => {
    const headers = tenant();
    const leaving = new AbortController();
    const streaming = await fetch(`${url}/stream`, { headers, signal: leaving.signal });
    const reader = (streaming.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    expect(await status(headers)).toBe(429);
    leaving.abort();
    await reader.read().catch(() => {});
    await slotBack(headers);
  });

  it('gives the slot back when the client leaves while the handler still runs', async () => {
    const headers = tenant();
    const started = await hangingCount();
    const leaving = new AbortController();
    const hanging = fetch(`${url}/hang`, { headers, signal: leaving.signal }).catch(
      (error: Error) => `left: ${error.name}`,
    );
    // Probed only once the handler runs: a probe sent beside the request could take the slot first.
    await waitFor(async () => (await hangingCount()) > started, 10_000, 'the handler to start');
    expect(await status(headers)).toBe(429);
    leaving.abort();
    expect(await hanging).toBe('left: AbortError');
    await slotBack(headers);
  });

  it('gives the slot back when the handler throws', async () => {
    const headers = tenant();
    expect((await fetch(`${url}/throws`, { headers })).status).toBe(500);
    expect((await fetch(`${url}/throws`, { headers })).status).toBe(500);
    expect(await status(headers)).toBe(200);
  });
});
