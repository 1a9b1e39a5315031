// Renders the suites' reports: RESULTS.md (tables, targets, machine) and an SVG chart of ratios.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { cpus, loadavg, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { type BenchConfig, type Ratio, type SuiteReport, times } from './measure.ts';

const require = createRequire(import.meta.url);

/** Versions of what was measured, read from the installed packages. */
const MEASURED = [
  'ioredis',
  'express',
  'koa',
  'fastify',
  'express-rate-limit',
  'rate-limit-redis',
  'rate-limiter-flexible',
  '@fastify/rate-limit',
  'koa-ratelimit',
  'hono',
  '@hono/node-server',
  'hono-rate-limiter',
  '@nestjs/core',
  '@nestjs/platform-express',
  '@nestjs/platform-fastify',
  '@nestjs/throttler',
  '@nest-lab/throttler-storage-redis',
  'autocannon',
];

/** The installed version: from the package.json above its entry, which not every package exports. */
function version(name: string): string {
  try {
    let dir = dirname(require.resolve(name));
    for (;;) {
      const path = join(dir, 'package.json');
      if (existsSync(path)) {
        const manifest = JSON.parse(readFileSync(path, 'utf8')) as {
          name?: string;
          version: string;
        };
        if (manifest.name === name) return manifest.version;
      }
      const parent = dirname(dir);
      if (parent === dir) return '?';
      dir = parent;
    }
  } catch {
    return '?';
  }
}

function command(file: string, args: string[]): string {
  try {
    return execFileSync(file, args, { encoding: 'utf8' }).trim();
  } catch {
    return '?';
  }
}

export function machine(): string[] {
  const cpu = cpus();
  const redis = command('redis-server', ['--version']).match(/v=(\S+)/)?.[1] ?? '?';
  return [
    `- Date: ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC, commit ${command('git', ['rev-parse', '--short', 'HEAD'])}`,
    `- Machine: ${cpu.length} × ${cpu[0]?.model.trim() ?? '?'}, ${Math.round(totalmem() / 2 ** 30)} GiB; Linux ${command('uname', ['-r'])}`,
    // What else ran: the same-run ratios hold under load, the absolute figures do not.
    `- Load average as the run ended: ${loadavg()
      .map((l) => l.toFixed(1))
      .join(', ')} (1, 5, 15 minutes) on ${cpu.length} cores`,
    `- Node.js ${process.version}, Redis ${redis} on loopback, started by the bench`,
    `- ${MEASURED.map((name) => `${name} ${version(name)}`).join(', ')}`,
  ];
}

function table(columns: readonly string[], rows: readonly (readonly string[])[]): string {
  const line = (cells: readonly string[]) => `| ${cells.join(' | ')} |`;
  return [line(columns), line(columns.map(() => '---')), ...rows.map(line)].join('\n');
}

export function markdown(reports: readonly SuiteReport[], config: BenchConfig): string {
  const out = [
    '# Benchmark results',
    '',
    'Written by `pnpm bench` from one run; every ratio compares figures taken in that same run,',
    `with contenders alternating over ${config.rounds} rounds of ${config.seconds} s and each reported by its median.`,
    'Default options throughout. Sentinel runs from the files its packages publish, built by `pnpm bench`',
    'before it measures, as a user installs them; the peers from theirs.',
    'See [the chart](results.svg) and, for what each suite does, [README.md](README.md).',
    '',
    ...machine(),
    '',
    '## Targets',
    '',
    table(
      ['suite', 'target', 'figure', 'met'],
      reports.flatMap((r) =>
        r.targets.map((t) => [r.title, t.goal, t.figure, t.met ? 'met' : '**not met**']),
      ),
    ),
  ];
  for (const report of reports) {
    out.push('', `## ${report.title}`, '', report.method, '', table(report.columns, report.rows));
    if (report.notes?.length) out.push('', ...report.notes.map((note) => `- ${note}`));
    if (report.gates?.length) {
      out.push(
        '',
        "CI's smoke run fails on a collapse of these ratios, measured there for a moment:",
        '',
        ...report.gates.map(
          (g) => `- ${g.label}: ${times(g.value)} here; a smoke run fails below ${g.collapse}×.`,
        ),
      );
    }
  }
  return `${out.join('\n')}\n`;
}

const xml = (text: string) =>
  text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

const TITLE = 'Sentinel ÷ peer (or ÷ floor), same run; higher is better';

/** Horizontal bars, one per ratio, grouped by suite; a line at 1× and a tick at each goal. */
export function chart(reports: readonly SuiteReport[]): string {
  const bars: (Ratio & { suite?: string })[] = [];
  for (const report of reports) {
    if (report.ratios.length === 0) continue;
    bars.push({ label: report.title, value: Number.NaN, suite: report.title });
    bars.push(...report.ratios);
  }
  const max = Math.max(
    2,
    ...bars.map((b) => (Number.isFinite(b.value) ? b.value : 0)),
    ...bars.map((b) => b.goal ?? 0),
  );
  // Labels are right-aligned to the bars: room for the longest, at about 6.6 px a character of
  // 12 px sans-serif, so that none runs off the left edge.
  const longest = Math.max(...bars.map((b) => (b.suite === undefined ? b.label.length : 0)));
  const left = Math.max(330, 14 + Math.ceil(longest * 6.6));
  const width = 420;
  const row = 20;
  const scale = (v: number) => left + (v / max) * width;
  const height = bars.length * row + 50;
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${left + width + 70}" height="${height}" font-family="sans-serif" font-size="12" role="img" aria-labelledby="title">`,
    `<title id="title">${TITLE}</title>`,
    '<rect width="100%" height="100%" fill="#fff"/>',
    `<text x="8" y="18" font-weight="bold">${TITLE}</text>`,
  ];
  bars.forEach((bar, i) => {
    const y = 30 + i * row;
    if (bar.suite !== undefined) {
      parts.push(`<text x="8" y="${y + 14}" font-weight="bold">${xml(bar.suite)}</text>`);
      return;
    }
    const good = bar.goal === undefined ? bar.value >= 1 : bar.value >= bar.goal;
    parts.push(
      `<text x="${left - 6}" y="${y + 14}" text-anchor="end">${xml(bar.label)}</text>`,
      `<rect x="${left}" y="${y + 3}" width="${Math.max(1, scale(bar.value) - left).toFixed(1)}" height="${row - 6}" fill="${good ? '#2a9d5c' : '#d08a2c'}"/>`,
      `<text x="${(scale(bar.value) + 4).toFixed(1)}" y="${y + 14}">${bar.value.toFixed(2)}×</text>`,
    );
    if (bar.goal !== undefined) {
      const x = scale(bar.goal).toFixed(1);
      parts.push(
        `<line x1="${x}" x2="${x}" y1="${y + 1}" y2="${y + row - 1}" stroke="#000" stroke-width="2"/>`,
      );
    }
  });
  const one = scale(1).toFixed(1);
  parts.push(
    `<line x1="${one}" x2="${one}" y1="26" y2="${height - 18}" stroke="#888" stroke-dasharray="3,3"/>`,
    `<text x="${one}" y="${height - 6}" text-anchor="middle" fill="#555">1×</text>`,
    `<text x="${left + width + 60}" y="${height - 6}" text-anchor="end" fill="#555">black tick: target</text>`,
    '</svg>',
  );
  return `${parts.join('\n')}\n`;
}
