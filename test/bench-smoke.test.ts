// Keeps `pnpm bench` working: every suite runs for a moment against the pinned peers. It asserts
// nothing about speed but a collapse: the bench itself fails when Sentinel under one hot key
// falls below half the floor's throughput (its gates), on Bun too. bench/RESULTS.md holds a full
// run's figures.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';

const root = fileURLToPath(new URL('..', import.meta.url));

it('runs every benchmark suite to the end', async () => {
  const { stdout } = await promisify(execFile)('pnpm', ['bench', '--smoke'], {
    cwd: root,
    timeout: 240_000,
    maxBuffer: 16 * 2 ** 20,
  });
  const ran = stdout.match(/^# \S+$/gm) ?? [];
  expect(stdout).toContain(`Ran ${ran.length} of ${ran.length} suites`);
  expect(ran.length).toBeGreaterThanOrEqual(7);
  // A figure that could not be measured prints as NaN or n/a: a suite that broke quietly.
  expect(stdout).not.toMatch(/NaN|n\/a/);
  // One hot-key gate per framework (Express, Koa, Fastify, Hono, Nest on Express and on Fastify),
  // and Hono's on Bun too, each printed with its ratio, and all held (else the bench exits 1 and
  // execFile throws).
  const gates = stdout.match(/^ {2}gate held: .*one hot key.*: \d+\.\d+×/gm) ?? [];
  console.log(gates.join('\n'));
  expect(gates).toHaveLength(7);
  expect(stdout).toMatch(/^ {2}gate held: Nest on Fastify: /m);
  // Hono's servers on Bun answered, and were measured beside Node's.
  expect(stdout).toMatch(/^ {2}Hono on Bun \| Sentinel as users write it.* \| \d/m);
}, 300_000);
