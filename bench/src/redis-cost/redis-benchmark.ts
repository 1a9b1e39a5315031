// Drives `redis-benchmark`: Redis's own saturated rate for one command, with no Node client in
// the way, so the figure is what the script costs the server and nothing else.
import { execFile, execFileSync } from 'node:child_process';

/** The load the figures were taken under: 50 clients, 16 deep, 10k random keys. */
export const LOAD = { clients: 50, pipeline: 16, keys: 10_000 } as const;

/** Throws a clear error when the binary is missing, before any Redis is started. */
export function requireRedisBenchmark(): void {
  try {
    execFileSync('redis-benchmark', ['--version'], { stdio: 'ignore' });
  } catch {
    throw new Error(
      'redis-benchmark is not on PATH; it ships with redis-server (Debian/Ubuntu: redis-tools or redis-server) and the redis-cost suite needs it',
    );
  }
}

/**
 * Sends `requests` of `command` (its key carrying `__rand_int__`) and returns the requests per
 * second redis-benchmark reports. An error reply makes redis-benchmark exit non-zero, so a script
 * that fails fast can never pass for a fast one.
 */
export function serverRate(
  port: number,
  requests: number,
  command: readonly string[],
): Promise<number> {
  const args = [
    '-p',
    String(port),
    '-c',
    String(LOAD.clients),
    '-P',
    String(LOAD.pipeline),
    '-r',
    String(LOAD.keys),
    '-n',
    String(requests),
    '--csv',
    ...command,
  ];
  return new Promise((resolve, reject) => {
    execFile('redis-benchmark', args, { timeout: 300_000 }, (error, stdout, stderr) => {
      if (error) {
        reject(
          new Error(`redis-benchmark ${command[0]} failed: ${stderr.trim() || error.message}`),
        );
        return;
      }
      // CSV: a header line, then "<test>","<rps>",... for the one test run.
      const last = stdout.trim().split('\n').at(-1) ?? '';
      const rps = Number(last.split('","')[1]);
      if (Number.isFinite(rps) && rps > 0) resolve(rps);
      else reject(new Error(`redis-benchmark printed no rate: ${stdout.trim()}`));
    });
  });
}
