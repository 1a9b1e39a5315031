// Polls a condition every 10 ms until it holds, or fails the test after `ms`.
import { setTimeout as sleep } from 'node:timers/promises';

export async function waitFor(
  condition: () => boolean | Promise<boolean>,
  ms = 5_000,
): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${ms} ms`);
    await sleep(10);
  }
}
