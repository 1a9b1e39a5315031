// The bench's servers in child processes: each killed should the bench exit first, and each
// stopped as a deployment stops it, SIGTERM, then SIGKILL when it has not gone after 5 s.
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';

/** One listener for every child still running, however many the suites start. */
const running = new Set<() => void>();
process.once('exit', () => {
  for (const kill of running) kill();
});

export interface Supervised {
  /** SIGKILL now, as for a server that never got ready. */
  kill(): void;
  /** SIGTERM, and its exit; SIGKILL after 5 s. */
  stop(): Promise<void>;
}

/** Supervises `child`, just spawned. */
export function supervise(child: ChildProcess): Supervised {
  const killed = (): void => void child.kill('SIGKILL');
  running.add(killed);
  const exited = once(child, 'close');
  return {
    kill() {
      killed();
      running.delete(killed);
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(killed, 5_000);
        await exited;
        clearTimeout(timer);
      }
      running.delete(killed);
    },
  };
}
