// Parses windows such as '10s' or 60000 into whole milliseconds.
const UNITS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
const PATTERN = /^(\d+)\s*(ms|s|m|h|d)$/;

/** Whole milliseconds for a window, or undefined when it is not a positive whole duration. */
export function parseWindow(window: unknown): number | undefined {
  let ms: number | undefined;
  if (typeof window === 'number') {
    ms = window;
  } else if (typeof window === 'string') {
    const match = PATTERN.exec(window.trim());
    if (match) ms = Number(match[1]) * UNITS[match[2] as keyof typeof UNITS];
  }
  return ms !== undefined && Number.isSafeInteger(ms) && ms > 0 ? ms : undefined;
}

/** The shortest exact text for a window: 60000 -> '1m', 1500 -> '1500ms'. */
export function formatWindow(ms: number): string {
  for (const unit of ['d', 'h', 'm', 's'] as const) {
    if (ms % UNITS[unit] === 0) return `${ms / UNITS[unit]}${unit}`;
  }
  return `${ms}ms`;
}
