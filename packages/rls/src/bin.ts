#!/usr/bin/env node
// sentinel-rls: not wired yet.
console.error('sentinel-rls: not built yet');
process.exit(1);
