// One process of the quota-lease ledger (quota-ledger.test.ts): sends bursts of consumes of one
// hot key (LEDGER_BURSTS, taken in turn) through a limiter with quota leases, one every
// LEDGER_PAUSE_MS; and writes every admission to its
// ledger file, with the times its call was sent and answered, before anything else happens:
// a process killed with SIGKILL loses no admission it made. On 'stop' it closes the limiter,
// giving back what its leases hold, reports its counts and exits.
import { closeSync, openSync, writeSync } from 'node:fs';
import { Redis } from 'ioredis';
import { type Algorithm, createLimiter } from '../../packages/core/src/index.ts';

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
};

const local = new WeakSet<object>();
const redis = new Redis(env('REDIS_URL'), { maxRetriesPerRequest: 1, enableOfflineQueue: false });
redis.on('error', () => {});
const limiter = createLimiter({
  redis,
  prefix: env('LEDGER_PREFIX'),
  limit: Number(env('LEDGER_LIMIT')),
  window: Number(env('LEDGER_WINDOW_MS')),
  algorithm: env('LEDGER_ALGORITHM') as Algorithm,
  quotaLeases: process.env.LEDGER_LEASES !== '0' && {
    hotAt: 8,
    duration: Number(env('LEDGER_LEASE_MS')),
  },
  // Refused while Redis is away: an admission the ledger counts is one the limit must hold for.
  onStoreError: 'deny',
  onError: () => {},
  // The decisions spent from a lease: the store answered the rest, in its own time.
  observe: {
    decision({ decision, storeMs }) {
      if (storeMs === undefined) local.add(decision);
    },
  },
});
const ledger = openSync(env('LEDGER_FILE'), 'a');
const counts = { admitted: 0, refused: 0, degraded: 0 };
let running = true;

async function decide(): Promise<void> {
  const sent = Date.now();
  const decision = await limiter.consume('hot');
  if (decision.degraded !== undefined) {
    counts.degraded++;
  } else if (decision.allowed) {
    writeSync(ledger, `${sent} ${Date.now()} ${local.has(decision) ? 'lease' : 'store'}\n`);
    counts.admitted++;
  } else {
    counts.refused++;
  }
}

const pauseMs = Number(env('LEDGER_PAUSE_MS'));

/**
 * One burst a turn: `size` consumes at once, `offsetMs` into the turn. `stalled`: the event loop
 * is stalled from the burst before until then, as a long garbage collection, a handler hogging
 * the CPU or a process the machine left unscheduled would stall it, so that no timer of the
 * limiter's runs meanwhile.
 */
interface Burst {
  readonly size: number;
  readonly offsetMs: number;
  readonly stalled: boolean;
}

/** Waited on to stall the thread without taking the CPU from the other processes. */
const STALL = new Int32Array(new SharedArrayBuffer(4));

// Bursts taken in turn, each as `<size>@<ms into its turn>`, with a trailing '!' for one the
// event loop is stalled up to.
const bursts: readonly Burst[] = env('LEDGER_BURSTS')
  .split(',')
  .map((burst) => {
    const [size, offsetMs] = burst.replace(/!$/, '').split('@').map(Number) as [number, number];
    return { size, offsetMs, stalled: burst.endsWith('!') };
  });

/**
 * A burst of consumes at once every `pauseMs`, each at its offset into a turn on the clock's
 * multiples of `pauseMs`, so that the processes burst at moments the test chose and at the same
 * turn, until stopped.
 */
async function run(): Promise<void> {
  while (running) {
    const turn = Math.floor(Date.now() / pauseMs) + 1;
    const { size, offsetMs, stalled } = bursts[turn % bursts.length] as Burst;
    const at = turn * pauseMs + offsetMs;
    if (stalled) Atomics.wait(STALL, 0, 0, Math.max(0, at - Date.now()));
    else await new Promise((resolve) => setTimeout(resolve, at - Date.now()));
    await Promise.all(Array.from({ length: size }, decide));
  }
}

const running_ = run();
process.send?.({ ready: true });
process.on('message', async (message: { stop?: boolean }) => {
  if (!message.stop) return;
  running = false;
  await running_;
  await limiter.close();
  closeSync(ledger);
  redis.disconnect();
  process.send?.({ counts }, () => process.exit(0));
});
// An orphan stops.
process.on('disconnect', () => process.exit(0));
