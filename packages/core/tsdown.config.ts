// Builds @sentinel/core with the build every package shares, plus the entries the adapters import.
import { defineConfig } from 'tsdown';
import { packageBuild } from '../../tsdown.base.ts';

export default defineConfig({
  ...packageBuild,
  // `adapter`: the names every adapter re-exports; `internal`: what adapters build on;
  // `prometheus`: the metrics helper, apart so that prom-client stays an optional peer.
  entry: ['src/index.ts', 'src/adapter.ts', 'src/internal.ts', 'src/prometheus.ts'],
});
