// Bun's binary as test/runtimes installs it: what test/harness/runtimes.ts's `runtimeBinary('bun')`
// resolves, resolved alike here, since the bench's TypeScript project cannot import test's files.
import { accessSync, constants } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const PACKAGE = '@oven/bun-linux-x64';
const fromRuntimes = createRequire(new URL('../../../test/runtimes/package.json', import.meta.url));

/** The absolute path of Bun's binary; throws, saying what to do, when it is not installed. */
export function bunBinary(): string {
  let path: string;
  try {
    path = join(dirname(fromRuntimes.resolve(`${PACKAGE}/package.json`)), 'bin/bun');
    accessSync(path, constants.X_OK);
  } catch (cause) {
    throw new Error(
      `Bun is not installed: test/runtimes depends on ${PACKAGE} (an optional dependency, ` +
        'installed on linux-x64 with glibc only). Run `pnpm install` at the repository root.',
      { cause },
    );
  }
  return path;
}
