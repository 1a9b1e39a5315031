// The harness's throw-away servers die with the process that started them, even a SIGKILLed one.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parentDeathSignalAvailable } from './redis-server.ts';
import { waitFor } from './wait-for.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const HOLDER = fileURLToPath(new URL('./redis-server-holder.ts', import.meta.url));

/** Whether `pid` runs; a zombie that no one has reaped yet counts as gone. */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== 'ESRCH';
  }
  try {
    // The state follows the command name, which is in parentheses and may contain spaces.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

/** The server pid the holder reports, or its exit status and stderr if it dies first. */
function reportedPid(holder: ChildProcess): Promise<number> {
  return new Promise((resolve, reject) => {
    let stderr = '';
    holder.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    holder.once('message', (message: { pid: number }) => resolve(message.pid));
    holder.once('exit', (code, signal) =>
      reject(new Error(`the holder exited (${code ?? signal}) before reporting:\n${stderr}`)),
    );
  });
}

// Linux only: elsewhere (macOS) there is no parent-death signal, so only an exit handler stops
// the servers, and SIGKILL runs none. On Linux a missing `setpriv --pdeathsig` fails the test.
describe.skipIf(process.platform !== 'linux')('a redis-server started by the harness', () => {
  it('is started through setpriv, which sets the parent-death signal', () => {
    expect(parentDeathSignalAvailable()).toBe(true);
  });

  it('is gone within 5 s after the test process that started it is SIGKILLed', async () => {
    // The harness gives each server a folder under TMPDIR that a SIGKILLed holder cannot remove.
    const tmp = mkdtempSync(join(tmpdir(), 'sentinel-holder-'));
    const holder = spawn(process.execPath, ['--import', 'tsx', HOLDER], {
      cwd: ROOT,
      env: { ...process.env, TMPDIR: tmp },
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    });
    let pid: number | undefined;
    try {
      pid = await reportedPid(holder);
      expect(running(pid)).toBe(true);

      holder.kill('SIGKILL');
      const server = pid;
      await waitFor(() => !running(server), 5_000).catch(() => {
        throw new Error(`redis-server ${server} still runs 5 s after its test process was killed`);
      });
    } finally {
      holder.kill('SIGKILL');
      if (pid !== undefined && running(pid)) process.kill(pid, 'SIGKILL');
      rmSync(tmp, { recursive: true, force: true });
    }
  });
});
