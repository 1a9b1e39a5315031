// The resolve hook of published-sentinel.mjs: @sentinel/<package>[/<path>] resolves as its
// package.json's publishConfig.exports would, to packages/<package>/dist. Run `pnpm build` first.
import { existsSync, readFileSync } from 'node:fs';

const PACKAGES = new URL('../../../packages/', import.meta.url);
const SPECIFIER = /^@sentinel\/([a-z-]+)(\/.*)?$/;

/** Each package's published exports, read once. */
const published = new Map();

function exportsOf(name) {
  let exports = published.get(name);
  if (exports === undefined) {
    const manifest = new URL(`${name}/package.json`, PACKAGES);
    exports = existsSync(manifest)
      ? (JSON.parse(readFileSync(manifest, 'utf8')).publishConfig?.exports ?? null)
      : null;
    published.set(name, exports);
  }
  return exports;
}

export async function resolve(specifier, context, nextResolve) {
  const match = SPECIFIER.exec(specifier);
  const exports = match && exportsOf(match[1]);
  const entry = exports?.[`.${match?.[2] ?? ''}`];
  if (!entry) return nextResolve(specifier, context);
  const target =
    typeof entry === 'string'
      ? entry
      : entry[context.conditions.includes('import') ? 'import' : 'require'].default;
  const url = new URL(`${match[1]}/${target}`, PACKAGES);
  if (!existsSync(url)) {
    throw new Error(`${specifier} resolves to ${url.pathname}, which is not built: run pnpm build`);
  }
  return { url: url.href, shortCircuit: true };
}
