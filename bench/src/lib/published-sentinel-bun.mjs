// published-sentinel.mjs for Bun: `bun --preload ./src/lib/published-sentinel-bun.mjs`.
// Bun resolves @sentinel/* to the workspace's TypeScript sources, as their package.json exports
// say, and its runtime plugins do not see bare imports resolve: this loads each published entry's
// source file as its built file instead, as publishConfig.exports names it. Run `pnpm build` first.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const PACKAGES = new URL('../../../packages/', import.meta.url);

/** Each exported source file of every package, to the built file its published export names. */
function builtEntries() {
  const built = new Map();
  for (const name of readdirSync(PACKAGES)) {
    const manifest = new URL(`${name}/package.json`, PACKAGES);
    if (!existsSync(manifest)) continue;
    const { exports, publishConfig } = JSON.parse(readFileSync(manifest, 'utf8'));
    for (const [path, source] of Object.entries(exports ?? {})) {
      const entry = publishConfig?.exports?.[path];
      const target = typeof entry === 'string' ? entry : entry?.import?.default;
      if (typeof source !== 'string' || !source.endsWith('.ts') || !target) continue;
      built.set(
        fileURLToPath(new URL(`${name}/${source}`, PACKAGES)),
        fileURLToPath(new URL(`${name}/${target}`, PACKAGES)),
      );
    }
  }
  return built;
}

const built = builtEntries();

Bun.plugin({
  name: 'published-sentinel',
  setup(build) {
    build.onLoad({ filter: /\/packages\/[a-z-]+\/src\/[^/]+\.ts$/ }, ({ path }) => {
      const target = built.get(path);
      if (target === undefined) return undefined;
      if (!existsSync(target)) {
        throw new Error(`${path} is published as ${target}, which is not built: run pnpm build`);
      }
      const code = readFileSync(target, 'utf8');
      const exportsDefault = /\bas default\b|\bexport default\b/.test(code);
      const from = JSON.stringify(target);
      return {
        contents: `export * from ${from};${exportsDefault ? `export { default } from ${from};` : ''}`,
        loader: 'js',
      };
    });
  },
});
