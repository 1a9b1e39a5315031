// The runtimes of test/runtimes (Bun, Deno, the Node lines), as absolute paths to their binaries.
import { accessSync, constants } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/** The Node lines the suites run on, oldest first. 20 is past end of life and still tested. */
export const NODE_LINES = ['node20', 'node22', 'node24', 'node26'] as const;
export type NodeLine = (typeof NODE_LINES)[number];

/** The lines Sentinel supports; the newest runs every suite. */
export const SUPPORTED_NODE_LINES = ['node22', 'node24', 'node26'] as const satisfies NodeLine[];
export const NEWEST_NODE_LINE = 'node26' satisfies NodeLine;

export type Runtime = 'bun' | 'deno' | NodeLine;

/** Each runtime's package, as test/runtimes/package.json names it, and its binary inside. */
const BINARIES: Record<Runtime, { name: string; bin: string }> = {
  bun: { name: '@oven/bun-linux-x64', bin: 'bin/bun' },
  deno: { name: '@deno/linux-x64-glibc', bin: 'deno' },
  node20: { name: 'node20', bin: 'bin/node' },
  node22: { name: 'node22', bin: 'bin/node' },
  node24: { name: 'node24', bin: 'bin/node' },
  node26: { name: 'node26', bin: 'bin/node' },
};

const fromRuntimes = createRequire(new URL('../runtimes/package.json', import.meta.url));

/**
 * The absolute path of a runtime's binary, resolved from test/runtimes as Node resolves its
 * dependencies. Throws when it is not installed (another platform than linux-x64 with glibc, or
 * no `pnpm install` since it was added): a suite that needs it fails and says so.
 */
export function runtimeBinary(runtime: Runtime): string {
  const { name, bin } = BINARIES[runtime];
  let dir: string;
  try {
    dir = dirname(fromRuntimes.resolve(`${name}/package.json`));
  } catch (cause) {
    throw new Error(
      `${runtime} is not installed: test/runtimes depends on ${name} (an optional dependency, ` +
        'installed on linux-x64 with glibc only). Run `pnpm install` at the repository root.',
      { cause },
    );
  }
  const path = join(dir, bin);
  try {
    accessSync(path, constants.X_OK);
  } catch (cause) {
    throw new Error(
      `${runtime}: ${path} of ${name} is missing or not executable. Run \`pnpm install\` at the ` +
        'repository root.',
      { cause },
    );
  }
  return path;
}
