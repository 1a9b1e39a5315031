// Builds @sentinel/fastify as ESM and CJS with type declarations, then lints the published shape.
import { defineConfig } from 'tsdown';

export default defineConfig({
  entry: ['src/index.ts'],
  format: ['esm', 'cjs'],
  dts: true,
  clean: true,
  platform: 'node',
  target: 'node20',
  publint: true,
  // The plugin is both the default and a named export; CommonJS gets them as named properties.
  outputOptions: { exports: 'named' },
});
