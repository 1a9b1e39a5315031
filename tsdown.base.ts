// The build every package shares: ESM and CJS for Node 20 with type declarations, linted with publint.
import type { UserConfig } from 'tsdown';

export const packageBuild = {
  entry: ['src/index.ts'],
  format: ['esm', 'cjs'],
  dts: true,
  clean: true,
  platform: 'node',
  target: 'node20',
  publint: true,
} satisfies UserConfig;
