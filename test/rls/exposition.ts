// A strict reader of the Prometheus text format, for the tests of sentinel-rls's /metrics.
import { expect } from 'vitest';

export interface Sample {
  readonly name: string;
  readonly labels: Record<string, string>;
  readonly value: number;
}

const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\["\\n])*)"(,|$)/y;

function unescapeLabel(value: string): string {
  return value.replace(/\\(["\\n])/g, (_, c: string) => (c === 'n' ? '\n' : c));
}

function parseLabels(text: string): Record<string, string> {
  const labels: Record<string, string> = {};
  LABEL.lastIndex = 0;
  while (LABEL.lastIndex < text.length) {
    const match = LABEL.exec(text);
    if (match === null) throw new Error(`bad labels: ${text}`);
    labels[match[1] as string] = unescapeLabel(match[2] as string);
  }
  return labels;
}

/**
 * A strict reader of the text format 0.0.4: every sample line is `name{labels} value`, every
 * family opens with HELP then TYPE, and every sample belongs to the family above it.
 */
export function parseExposition(text: string): Sample[] {
  expect(text.endsWith('\n')).toBe(true);
  const samples: Sample[] = [];
  let family: string | undefined;
  let type: string | undefined;
  const lines = text.slice(0, -1).split('\n');
  for (const [i, line] of lines.entries()) {
    const help = /^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .+$/.exec(line);
    if (help !== null) {
      family = help[1];
      expect(lines[i + 1]).toMatch(new RegExp(`^# TYPE ${family} (counter|histogram)$`));
      type = /(counter|histogram)$/.exec(lines[i + 1] as string)?.[1];
      continue;
    }
    if (line.startsWith('# TYPE ')) continue;
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (sample === null) throw new Error(`line ${i + 1} is not a sample: ${JSON.stringify(line)}`);
    const [, name = '', labels, value = ''] = sample;
    const base = type === 'histogram' ? name.replace(/_(bucket|sum|count)$/, '') : name;
    expect(base).toBe(family);
    expect(Number.isFinite(Number(value))).toBe(true);
    samples.push({ name, labels: labels ? parseLabels(labels) : {}, value: Number(value) });
  }
  return samples;
}
