// A busy loop in another process, for the load a shared machine puts beside a test.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { diesWithThisProcess } from './redis-server.ts';

/** Runs `test` while another process spins on a core, and stops that process afterwards. */
export async function besideCpuHog<T>(test: () => Promise<T>): Promise<T> {
  const [command, args] = diesWithThisProcess(process.execPath, [
    '-e',
    "process.stdout.write('spinning\\n'); for (;;) {}",
  ]);
  const hog = spawn(command, args, { stdio: ['ignore', 'pipe', 'ignore'] });
  try {
    // Node takes a moment to start: the test begins once the loop does.
    await once(hog.stdout, 'data');
    return await test();
  } finally {
    hog.kill('SIGKILL');
  }
}
