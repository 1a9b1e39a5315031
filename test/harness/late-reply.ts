// Makes Redis answer a script call late although it ran it in time: a busy script sent right
// behind it on the same connection holds back both replies.
import type { Cluster, Redis } from 'ioredis';
import { vi } from 'vitest';

/** Spins for ARGV[1] ms: Redis reads nothing and writes no reply meanwhile. */
const BUSY = `
local t = redis.call('TIME')
local stop = t[1] * 1000000 + t[2] + ARGV[1] * 1000
while true do
  local now = redis.call('TIME')
  if now[1] * 1000000 + now[2] >= stop then return 0 end
end`;

/** Where the busy script goes, and who hears that it went. */
export interface HoldOptions {
  /**
   * The connection the calls leave on: `client` itself, or for a Cluster the master's connection
   * that serves their slot (one of `cluster.nodes('master')`).
   */
  connection?: Redis;
  /** Called as each held call and its busy script leave. */
  onHold?: () => void;
}

/**
 * Holds back the reply to each of the next `count` script calls (FCALL, EVALSHA) on `client` for
 * `ms`. Redis runs the call at once, with its expiry still ahead, and then, in the same read of
 * the connection, a script that keeps it busy for `ms`; replies go out only after both have run.
 * For a deadline shorter than `ms`, the store gives up on the call, whose reply then comes late:
 * what a Redis stopped between running a call and answering it does. Resolves once the last
 * held reply has come.
 */
export function holdReplies(
  client: Redis | Cluster,
  ms: number,
  count = 1,
  { connection = client as Redis, onHold }: HoldOptions = {},
): Promise<void> {
  let done!: () => void;
  let failed!: (error: unknown) => void;
  const held = new Promise<void>((resolve, reject) => {
    done = resolve;
    failed = reject;
  });
  const fcall = client.fcall.bind(client);
  const evalsha = client.evalsha.bind(client);
  let left = count;
  function hold<T>(send: () => T): T {
    if (left === 0) return send();
    left--;
    // Corked, the call and the busy script leave in one write, and Redis reads them together.
    connection.stream.cork();
    const reply = send();
    const busy = connection.eval(BUSY, 0, String(ms));
    process.nextTick(() => connection.stream.uncork());
    onHold?.();
    if (left === 0) {
      vi.mocked(client.fcall).mockRestore();
      vi.mocked(client.evalsha).mockRestore();
      busy.then(() => done(), failed);
    }
    return reply;
  }
  vi.spyOn(client as Redis, 'fcall').mockImplementation(((...args: Parameters<Redis['fcall']>) =>
    hold(() => fcall(...args))) as never);
  vi.spyOn(client as Redis, 'evalsha').mockImplementation(((
    ...args: Parameters<Redis['evalsha']>
  ) => hold(() => evalsha(...args))) as never);
  return held;
}
