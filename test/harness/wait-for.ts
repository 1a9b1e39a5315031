// The suites' one wait loop: poll every 10 ms until something holds, or fail the test after `ms`.
import { setTimeout as sleep } from 'node:timers/promises';

/** Resolves once `condition` holds; an error it throws fails the wait at once. */
export async function waitFor(
  condition: () => boolean | Promise<boolean>,
  ms = 5_000,
  what = 'the condition',
): Promise<void> {
  await poll(async () => (await condition()) || null, ms, what);
}

/**
 * Resolves to the first thing `probe` finds. A probe that throws (a node going away) finds
 * nothing, and polling goes on.
 */
export function waitForValue<T>(
  probe: () => Promise<T | null | false>,
  ms: number,
  what: string,
): Promise<T> {
  return poll(() => probe().catch(() => null), ms, what);
}

async function poll<T>(
  probe: () => Promise<T | null | false>,
  ms: number,
  what: string,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const found = await probe();
    if (found !== null && found !== false) return found;
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${ms} ms`);
    await sleep(10);
  }
}
