// Builds @sentinel/fastify with the build every package shares.
import { defineConfig } from 'tsdown';
import { packageBuild } from '../../tsdown.base.ts';

export default defineConfig({
  ...packageBuild,
  // The plugin is both the default and a named export; CommonJS gets them as named properties.
  outputOptions: { exports: 'named' },
});
