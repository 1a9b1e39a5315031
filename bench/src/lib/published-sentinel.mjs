// Loads Sentinel as a user installs it: `node --import ./src/lib/published-sentinel.mjs`.
// In the workspace, @sentinel/* export their TypeScript sources, which tsx compiles with extras
// a published build has not (it keeps every function's name, at a cost per closure created):
// this sends every import of them to the built files their published exports name instead.
import { register } from 'node:module';

register('./published-sentinel-hooks.mjs', import.meta.url);
