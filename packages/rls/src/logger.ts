// The service's log: one line per event on stderr, at LOG_LEVEL and above, in the key=value
// form the reference service writes by default.
import type { LogLevel } from './settings.ts';

export interface Logger {
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

const RANK: Readonly<Record<LogLevel, number>> = {
  trace: 0,
  debug: 1,
  info: 2,
  warn: 3,
  error: 4,
  fatal: 5,
  panic: 6,
};

export function logger(
  level: LogLevel,
  write = (line: string) => process.stderr.write(line),
): Logger {
  const at = (name: 'debug' | 'info' | 'warn' | 'error') => (message: string) => {
    if (RANK[name] < RANK[level]) return;
    write(`time="${new Date().toISOString()}" level=${name} msg=${JSON.stringify(message)}\n`);
  };
  return { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}
