// Builds @sentinel/core with the build every package shares, plus the entries the adapters import.
import { defineConfig } from 'tsdown';
import { packageBuild } from '../../tsdown.base.ts';

export default defineConfig({
  ...packageBuild,
  // `adapter`: the names every adapter re-exports; `internal`: what adapters build on.
  entry: ['src/index.ts', 'src/adapter.ts', 'src/internal.ts'],
});
