// The time this process spent able to hear Redis: waiting for I/O, not running JavaScript.
import { performance } from 'node:perf_hooks';

/**
 * Milliseconds the event loop has spent blocked waiting for I/O since it started
 * (`performance.eventLoopUtilization().idle`). A reply that arrives ends such a wait at once, so
 * only this time can show that Redis is silent. Time spent running JavaScript does not count:
 * our own loop sending a burst, a busy handler, a garbage-collection pause. A reply that arrived
 * meanwhile waits in the socket, and the loop reads it before it waits again.
 */
export function listeningTime(): number {
  return performance.eventLoopUtilization().idle;
}
