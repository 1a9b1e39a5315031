// pnpm bench [--smoke] [--rounds N] [--seconds S] [--only part,...] [suite ...]
// Runs the suites (all by default); a full run writes bench/RESULTS.md and bench/results.svg.
// --smoke runs every suite for a moment and only checks that it completes; --only runs some parts
// of a suite (the HTTP suite's frameworks, as `--only nest-express,nest-fastify`) and writes nothing.
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { type BenchConfig, type SuiteReport, times } from './lib/measure.ts';
import { chart, markdown } from './lib/report.ts';
import { SUITES } from './suites/index.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    smoke: { type: 'boolean', default: false },
    rounds: { type: 'string' },
    seconds: { type: 'string' },
    only: { type: 'string' },
  },
});

const smoke = values.smoke ?? false;
const config: BenchConfig = {
  smoke,
  rounds: Number(values.rounds ?? (smoke ? 1 : 5)),
  seconds: Number(values.seconds ?? (smoke ? 0.2 : 3)),
  ...(values.only !== undefined && { only: values.only.split(',') }),
};
const names = positionals.length ? positionals : Object.keys(SUITES);
const unknown = names.filter((name) => !(name in SUITES));
if (unknown.length) {
  console.error(
    `Unknown suite ${unknown.join(', ')}; the suites are ${Object.keys(SUITES).join(', ')}`,
  );
  process.exit(2);
}

const reports: SuiteReport[] = [];
const collapsed: string[] = [];
for (const name of names) {
  const started = performance.now();
  console.log(`# ${name}`);
  const report = await (SUITES[name] as (typeof SUITES)[string])(config);
  reports.push(report);
  for (const row of report.rows) console.log(`  ${row.join(' | ')}`);
  for (const target of report.targets) {
    console.log(`  target ${target.met ? 'met' : 'NOT met'}: ${target.goal}: ${target.figure}`);
  }
  for (const gate of report.gates ?? []) {
    const ok = gate.value >= gate.collapse;
    console.log(
      `  gate ${ok ? 'held' : 'COLLAPSED'}: ${gate.label}: ${times(gate.value)} (fails below ${gate.collapse}×)`,
    );
    if (!ok) collapsed.push(gate.label);
  }
  console.log(`  (${((performance.now() - started) / 1000).toFixed(1)} s)`);
}

console.log(`Ran ${reports.length} of ${Object.keys(SUITES).length} suites`);
if (collapsed.length) {
  console.error(`Collapsed: ${collapsed.join('; ')}`);
  process.exitCode = 1;
}

// Only a full run replaces the committed results; a smoke run or a chosen few suites or parts print.
if (!smoke && positionals.length === 0 && config.only === undefined) {
  const dir = new URL('../', import.meta.url);
  writeFileSync(new URL('RESULTS.md', dir), markdown(reports, config));
  writeFileSync(new URL('results.svg', dir), chart(reports));
  console.log('Wrote bench/RESULTS.md and bench/results.svg');
}
