// Runs vitest on Node lines of test/runtimes, one after another, and prints each line's wall time.
//
//   tsx test/runtimes/node-lines.ts 26            every suite, on the newest line
//   tsx test/runtimes/node-lines.ts 20 22 24      the line suites on each older line
//   tsx test/runtimes/node-lines.ts 22 -- <args>  vitest run <args> on Node 22
//
// The line's binary runs vitest, and its directory comes first on the PATH, so vitest's workers
// (process.execPath) and every child a suite starts with `node`, `tsx`, `pnpm` or `npm` run on it.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { delimiter, dirname, join } from 'node:path';
import { NEWEST_NODE_LINE, NODE_LINES, type NodeLine, runtimeBinary } from '../harness/runtimes.ts';

const root = new URL('../../', import.meta.url).pathname;

/**
 * What the older lines run: what must hold on every Node a user may run, the exact counts, the
 * failure modes, the adapters and the published packages. The newest line runs every suite.
 */
function lineSuites(): string[] {
  // Each adapter package's own suites; core's exactness suites, not its unit suites, which the
  // newest line runs, so that four lines stay well inside CI's time.
  const adapterSuites = readdirSync(join(root, 'packages'))
    .filter((name) => name !== 'core' && name !== 'rls')
    .map((name) => `packages/${name}/test`)
    .filter((dir) => existsSync(join(root, dir)));
  return [
    ...adapterSuites,
    'packages/core/test/limiter/race.test.ts',
    'packages/core/test/limiter/login-race.test.ts',
    'test/conformance',
    'test/adapters',
    'test/multi-process/race.test.ts',
    'test/multi-process/nest.test.ts',
    'test/failure-',
    'test/faults',
    'test/packaging.test.ts',
  ];
}

/** Leading arguments name lines (`22` or `node22`); the rest, after an optional `--`, go to vitest. */
function parse(argv: string[]): { lines: NodeLine[]; vitestArgs: string[] | undefined } {
  let count = argv.findIndex((arg) => !/^(node)?\d+$/.test(arg));
  if (count === -1) count = argv.length;
  const lines = argv.slice(0, count).map((name) => {
    const line = `node${name.replace(/^node/, '')}`;
    if (!(NODE_LINES as readonly string[]).includes(line)) {
      throw new Error(`unknown Node line ${name}: one of ${NODE_LINES.join(', ')}`);
    }
    return line as NodeLine;
  });
  if (lines.length === 0) throw new Error(`name one Node line or more: ${NODE_LINES.join(', ')}`);
  const rest = argv.slice(argv[count] === '--' ? count + 1 : count);
  return { lines, vitestArgs: rest.length > 0 ? rest : undefined };
}

function runVitest(node: string, args: string[]): Promise<number> {
  const vitest = join(
    dirname(createRequire(join(root, 'package.json')).resolve('vitest/package.json')),
    'vitest.mjs',
  );
  const env = {
    ...process.env,
    PATH: `${dirname(node)}${delimiter}${process.env.PATH ?? ''}`,
    // What package managers read for "the node that runs me", set by pnpm to its own.
    NODE: node,
    npm_node_execpath: node,
  };
  return new Promise((resolve, reject) => {
    const child = spawn(node, [vitest, 'run', ...args], { cwd: root, env, stdio: 'inherit' });
    child.on('error', reject);
    child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
}

function minutes(ms: number): string {
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, '0')}s`;
}

const { lines, vitestArgs } = parse(process.argv.slice(2));
const results: string[] = [];
let failed = false;
for (const line of lines) {
  const node = runtimeBinary(line);
  const args = vitestArgs ?? (line === NEWEST_NODE_LINE ? [] : lineSuites());
  const what = vitestArgs
    ? 'vitest run with the arguments given'
    : args.length
      ? 'the line suites'
      : 'every suite';
  const version = execFileSync(node, ['--version'], { encoding: 'utf8' }).trim();
  console.log(`\n=== Node ${version} (${node}): ${what}\n`);
  const started = performance.now();
  const code = await runVitest(node, args);
  const result = `Node ${line.slice(4)}: ${what}, ${code === 0 ? 'passed' : `FAILED (exit ${code})`} in ${minutes(performance.now() - started)}`;
  console.log(`\n=== ${result}`);
  results.push(result);
  if (code !== 0) failed = true;
}
if (lines.length > 1) console.log(`\n${results.join('\n')}`);
process.exitCode = failed ? 1 : 0;
