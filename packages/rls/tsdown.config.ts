// Builds @sentinel/rls: the library and the `sentinel-rls` bin, with the build every package shares.
import { defineConfig } from 'tsdown';
import { packageBuild } from '../../tsdown.base.ts';

export default defineConfig({ ...packageBuild, entry: ['src/index.ts', 'src/bin.ts'] });
