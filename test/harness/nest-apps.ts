// Compiles the Nest test apps with tsc, as `nest build` does, so that their decorators carry the metadata Nest injects by.
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');

/** The folder of the Nest test apps' sources; their compiled modules are in its `dist/`. */
export const NEST_APPS = join(root, 'packages/nestjs/test/apps');

/** A compiled app module's path, such as nestApp('http-app') for dist/http-app.js. */
export function nestApp(name: string): string {
  return join(NEST_APPS, 'dist', `${name}.js`);
}

/** Runs `tsc --build` on the apps: incremental, so quick when nothing changed. */
export function compileNestApps(): void {
  const tsc = createRequire(join(root, 'package.json')).resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, '--build', NEST_APPS], { cwd: root, stdio: 'inherit' });
}
