// Runs the gateway against a Redis that is killed and restarted under load, and charts its decisions.
//
//   pnpm --filter @sentinel/example-gateway exec tsx scripts/outage-chart.ts
//
// Writes docs/outage.svg and prints a summary. Needs redis-server on the PATH. An example is what
// a user copies, so this starts Redis and the gateway itself rather than through the test harness.
import { type ChildProcess, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

const GATEWAY_DIR = fileURLToPath(new URL('..', import.meta.url));
const OUT = fileURLToPath(new URL('../../../docs/outage.svg', import.meta.url));

const RUN_S = 40;
const KILL_AT_S = 12;
const RESTART_AT_S = 24;
/** 20 clients at 10 requests a second each, paced open-loop so a slow answer delays nothing. */
const CLIENTS = 20;
const RATE = 200;
/** Tiers of the 20 clients: ENTERPRISE stays under its limit, PRO and FREE run far past theirs. */
const CLIENT_TIERS = [
  ...Array<string>(3).fill('ENTERPRISE'),
  ...Array<string>(8).fill('PRO'),
  ...Array<string>(9).fill('FREE'),
];

const OUTCOMES = ['allowed', 'limited', 'degraded'] as const;
type Outcome = (typeof OUTCOMES)[number];

/** One second of the run: decisions by outcome, and the gauges as the scrape ending it saw them. */
interface Second {
  t: number;
  counts: Record<Outcome, number>;
  storeUp: boolean;
  breakerOpen: boolean;
}

/** One request: when it was sent (ms since the load started), how long it took, its status. */
interface Sample {
  sentMs: number;
  latencyMs: number;
  status: number;
}

// Whatever way this script ends, it leaves no server behind.
const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (address === null || typeof address === 'string') throw new Error('no free port');
  return address.port;
}

function track(child: ChildProcess): ChildProcess {
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}

async function exited(child: ChildProcess): Promise<number | string> {
  if (child.exitCode !== null || child.signalCode !== null) {
    return child.exitCode ?? (child.signalCode as string);
  }
  return new Promise((resolve) =>
    child.once('exit', (code, signal) => resolve(code ?? signal ?? '')),
  );
}

/** A redis-server with no persistence, so that a restart comes back empty, as after a crash. */
async function startRedis(port: number): Promise<ChildProcess> {
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
  const child = track(spawn('redis-server', args, { stdio: 'ignore' }));
  const deadline = Date.now() + 10_000;
  while (!(await answersPing(port))) {
    if (child.exitCode !== null) throw new Error(`redis-server exited at start on port ${port}`);
    if (Date.now() > deadline) throw new Error(`redis-server did not answer on port ${port}`);
    await sleep(20);
  }
  return child;
}

function answersPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ port, host: '127.0.0.1' });
    socket.setTimeout(500, () => socket.destroy());
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('data', (data) => {
      resolve(data.toString().startsWith('+PONG'));
      socket.destroy();
    });
    socket.once('close', () => resolve(false));
    socket.once('error', () => {});
  });
}

/** Starts `src/main.ts` and reads its banner for the address and the demo key of each tier. */
async function startGateway(redisUrl: string) {
  const child = track(
    spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
      cwd: GATEWAY_DIR,
      // Per-request logs at info would cost the gateway more than the decisions being charted.
      env: { ...process.env, REDIS_URL: redisUrl, PORT: '0', LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'inherit'],
    }),
  );
  const keys = new Map<string, string>();
  let address: string | undefined;
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error('the gateway printed no banner in 20 s')),
      20_000,
    );
    child.once('exit', (code) => reject(new Error(`the gateway exited at start (${code})`)));
    lines.on('line', (line) => {
      address ??= /listening on (\S+)/.exec(line)?.[1];
      const key = /^ {2}(FREE|PRO|ENTERPRISE)\s+(\S+)\s+\d+ per /.exec(line);
      if (key?.[1] && key[2]) keys.set(key[1], key[2]);
      // The curl line ends the banner; what follows are the gateway's warnings, as pino JSON.
      if (line.startsWith('  curl')) {
        clearTimeout(timer);
        resolve();
      } else if (line.startsWith('{')) logLine(line);
    });
  });
  if (address === undefined || keys.size < 3)
    throw new Error('the banner lacks an address or keys');
  return { child, address, keys };
}

let t0 = 0;
const elapsedS = () => ((performance.now() - t0) / 1000).toFixed(1);

function logLine(line: string): void {
  try {
    const { msg } = JSON.parse(line) as { msg?: string };
    console.log(`  t=${elapsedS()}s gateway: ${msg}`);
  } catch {
    console.log(`  gateway: ${line}`);
  }
}

/** Sums `sentinel_decisions_total` by outcome; the lowest `store_up`, the highest `breaker_open`. */
function readMetrics(text: string) {
  const counts: Record<Outcome, number> = { allowed: 0, limited: 0, degraded: 0 };
  let storeUp = 1;
  let breakerOpen = 0;
  for (const line of text.split('\n')) {
    const decision = /^sentinel_decisions_total\{.*outcome="(\w+)".*\} (\S+)$/.exec(line);
    if (decision?.[1] && decision[2] && decision[1] in counts) {
      counts[decision[1] as Outcome] += Number(decision[2]);
    }
    const gauge = /^sentinel_(store_up|breaker_open)\{.*\} (\S+)$/.exec(line);
    if (gauge?.[1] === 'store_up') storeUp = Math.min(storeUp, Number(gauge[2]));
    if (gauge?.[1] === 'breaker_open') breakerOpen = Math.max(breakerOpen, Number(gauge[2]));
  }
  return { counts, storeUp: storeUp === 1, breakerOpen: breakerOpen === 1 };
}

async function main(): Promise<void> {
  const port = await freePort();
  const redisUrl = `redis://127.0.0.1:${port}`;
  let redis = await startRedis(port);
  const gateway = await startGateway(redisUrl);
  console.log(`gateway at ${gateway.address}, redis-server on port ${port}`);
  const clientKeys = CLIENT_TIERS.map((tier) => gateway.keys.get(tier) as string);

  const samples: Sample[] = [];
  let failures = 0;
  let inFlight = 0;
  const send = async (key: string, sentMs: number) => {
    inFlight++;
    try {
      const response = await fetch(`${gateway.address}/hello`, {
        headers: { 'x-api-key': key },
        signal: AbortSignal.timeout(5000),
      });
      await response.arrayBuffer();
      samples.push({ sentMs, latencyMs: performance.now() - t0 - sentMs, status: response.status });
    } catch {
      failures++;
    } finally {
      inFlight--;
    }
  };

  const seconds: Second[] = [];
  let last = readMetrics(await (await fetch(`${gateway.address}/metrics`)).text());
  let lastAt = 0;
  const scrape = async (t: number) => {
    const now = readMetrics(await (await fetch(`${gateway.address}/metrics`)).text());
    const at = performance.now() - t0;
    const per = (outcome: Outcome) =>
      ((now.counts[outcome] - last.counts[outcome]) * 1000) / (at - lastAt);
    seconds.push({
      t,
      counts: { allowed: per('allowed'), limited: per('limited'), degraded: per('degraded') },
      storeUp: now.storeUp,
      breakerOpen: now.breakerOpen,
    });
    last = now;
    lastAt = at;
  };

  t0 = performance.now();
  let killedAt = Number.NaN;
  let restartedAt = Number.NaN;
  let answersAt = Number.NaN;
  const outage = (async () => {
    await sleep(KILL_AT_S * 1000);
    killedAt = performance.now() - t0;
    redis.kill('SIGKILL');
    await exited(redis);
    console.log(`  t=${elapsedS()}s redis-server killed`);
    await sleep(t0 + RESTART_AT_S * 1000 - performance.now());
    restartedAt = performance.now() - t0;
    redis = await startRedis(port);
    answersAt = performance.now() - t0;
    console.log(`  t=${elapsedS()}s redis-server restarted, empty, on the same port`);
  })();
  const scrapes = (async () => {
    for (let t = 1; t <= RUN_S; t++) {
      await sleep(t0 + t * 1000 - performance.now());
      await scrape(t);
    }
  })();
  const requests: Promise<void>[] = [];
  for (let sent = 0; sent < RATE * RUN_S; ) {
    const nowMs = performance.now() - t0;
    for (
      const due = Math.min(Math.floor((nowMs * RATE) / 1000), RATE * RUN_S);
      sent < due;
      sent++
    ) {
      requests.push(send(clientKeys[sent % CLIENTS] as string, (sent * 1000) / RATE));
    }
    await sleep(2);
  }
  await Promise.all([outage, scrapes, ...requests]);

  gateway.child.kill('SIGTERM');
  const gatewayExit = await exited(gateway.child);
  redis.kill('SIGTERM');
  await exited(redis);

  writeFileSync(OUT, renderChart(seconds, killedAt / 1000, restartedAt / 1000));
  summarize({
    samples,
    failures,
    seconds,
    killedAt,
    restartedAt,
    answersAt,
    gatewayExit,
    inFlight,
  });
}

function summarize(run: {
  samples: Sample[];
  failures: number;
  seconds: Second[];
  killedAt: number;
  restartedAt: number;
  answersAt: number;
  gatewayExit: number | string;
  inFlight: number;
}): void {
  const { samples, seconds, killedAt, answersAt } = run;
  const during = samples.filter((s) => s.sentMs >= killedAt && s.sentMs < run.restartedAt);
  const maxLatency = (list: Sample[]) => Math.max(...list.map((s) => s.latencyMs)).toFixed(1);
  const sorted = samples.map((s) => s.latencyMs).sort((a, b) => a - b);
  const p99 = (sorted[Math.floor(sorted.length * 0.99)] ?? 0).toFixed(1);
  const firstLimited = samples
    .filter((s) => s.status === 429 && s.sentMs >= answersAt)
    .reduce((min, s) => Math.min(min, s.sentMs + s.latencyMs), Number.POSITIVE_INFINITY);
  const byStatus = new Map<number, number>();
  for (const s of samples) byStatus.set(s.status, (byStatus.get(s.status) ?? 0) + 1);
  const when = (pick: (s: Second) => boolean) =>
    seconds
      .filter(pick)
      .map((s) => s.t)
      .join(',') || 'never';

  console.log('\nsecond  allowed  limited  degraded  store_up  breaker_open');
  for (const s of seconds) {
    const n = (v: number) => v.toFixed(0).padStart(7);
    const { allowed, limited, degraded } = s.counts;
    console.log(
      `${String(s.t).padStart(6)}  ${n(allowed)}  ${n(limited)}  ${n(degraded)}   ${Number(s.storeUp)}         ${Number(s.breakerOpen)}`,
    );
  }
  console.log(`
requests: ${samples.length} answered in ${RUN_S} s (${(samples.length / RUN_S).toFixed(1)} per second), ${run.failures} failed without an answer
statuses: ${[...byStatus].map(([status, count]) => `${status}: ${count}`).join(', ')}
5xx responses: ${samples.filter((s) => s.status >= 500).length}
latency: p99 ${p99} ms, max ${maxLatency(samples)} ms; max while Redis was down ${maxLatency(during)} ms (${during.length} requests)
redis-server killed at ${(killedAt / 1000).toFixed(2)} s, restarted at ${(run.restartedAt / 1000).toFixed(2)} s, answering at ${(answersAt / 1000).toFixed(2)} s
first 429 after the restart: ${((firstLimited - answersAt) / 1000).toFixed(2)} s after redis-server answered
store_up 0 at the scrapes of seconds: ${when((s) => !s.storeUp)}
breaker_open 1 at the scrapes of seconds: ${when((s) => s.breakerOpen)}
gateway exit on SIGTERM: ${run.gatewayExit}
chart: ${OUT}`);
}

const COLORS: Record<Outcome, string> = {
  allowed: '#009E73',
  limited: '#D55E00',
  degraded: '#0072B2',
};

/** The smallest 1, 2 or 5 × 10^n step that draws at most five gridlines up to `max`. */
function tickStep(max: number): number {
  const magnitude = 10 ** Math.floor(Math.log10(Math.max(max, 1) / 5));
  return [1, 2, 5, 10].map((m) => m * magnitude).find((step) => max / step <= 5) ?? magnitude * 10;
}

/** A self-contained SVG: a line per outcome, the outage shaded, the breaker's open seconds marked. */
function renderChart(seconds: Second[], downFrom: number, downTo: number): string {
  const W = 720;
  const H = 320;
  const left = 56;
  const right = W - 20;
  const top = 70;
  const bottom = H - 46;
  const max = Math.max(...seconds.flatMap((s) => OUTCOMES.map((o) => s.counts[o])));
  const step = tickStep(max);
  const yMax = Math.ceil(max / step) * step;
  const x = (t: number) => (left + ((right - left) * t) / RUN_S).toFixed(1);
  const y = (v: number) => (bottom - ((bottom - top) * v) / yMax).toFixed(1);
  const title = 'Decisions per second through a Redis outage';
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="system-ui, -apple-system, 'Segoe UI', sans-serif" font-size="12" role="img" aria-labelledby="title desc">`,
    `<title id="title">${title}</title>`,
    `<desc id="desc">The gateway example under ${RATE} requests a second from ${CLIENTS} clients, Redis killed at ${downFrom.toFixed(0)} s and restarted empty at ${downTo.toFixed(0)} s. While Redis is down every decision is degraded (admitted, fail open); once it is back, decisions are allowed or limited again.</desc>`,
    `<rect width="${W}" height="${H}" fill="#fff"/>`,
    `<text x="${left}" y="24" font-size="16" font-weight="600" fill="#222">${title}</text>`,
  ];
  // The legend: one swatch per outcome, then the shaded outage and the breaker's strip.
  let lx = left;
  for (const outcome of OUTCOMES) {
    out.push(
      `<line x1="${lx}" x2="${lx + 18}" y1="46" y2="46" stroke="${COLORS[outcome]}" stroke-width="3"/>`,
      `<text x="${lx + 24}" y="50" fill="#222">${outcome}</text>`,
    );
    lx += 24 + outcome.length * 7 + 22;
  }
  out.push(
    `<rect x="${lx}" y="39" width="18" height="14" fill="#000" fill-opacity="0.08"/>`,
    `<text x="${lx + 24}" y="50" fill="#222">Redis down</text>`,
    `<rect x="${lx + 112}" y="43" width="18" height="6" fill="#E69F00"/>`,
    `<text x="${lx + 136}" y="50" fill="#222">breaker open</text>`,
  );
  out.push(
    `<rect x="${x(downFrom)}" y="${top}" width="${(Number(x(downTo)) - Number(x(downFrom))).toFixed(1)}" height="${bottom - top}" fill="#000" fill-opacity="0.08"/>`,
  );
  for (let v = 0; v <= yMax; v += step) {
    out.push(
      `<line x1="${left}" x2="${right}" y1="${y(v)}" y2="${y(v)}" stroke="#ddd"/>`,
      `<text x="${left - 6}" y="${Number(y(v)) + 4}" text-anchor="end" fill="#555">${v}</text>`,
    );
  }
  for (let t = 0; t <= RUN_S; t += 5) {
    out.push(
      `<line x1="${x(t)}" x2="${x(t)}" y1="${bottom}" y2="${bottom + 4}" stroke="#555"/>`,
      `<text x="${x(t)}" y="${bottom + 17}" text-anchor="middle" fill="#555">${t}</text>`,
    );
  }
  out.push(
    `<line x1="${left}" x2="${right}" y1="${bottom}" y2="${bottom}" stroke="#555"/>`,
    `<text x="${(left + right) / 2}" y="${H - 10}" text-anchor="middle" fill="#333">seconds since the load started (${RATE} requests a second)</text>`,
    `<text transform="translate(16 ${(top + bottom) / 2}) rotate(-90)" text-anchor="middle" fill="#333">decisions per second</text>`,
  );
  // Each second's rate is drawn at its middle; the gauges are as the scrape ending it saw them.
  for (const s of seconds) {
    if (s.breakerOpen) {
      out.push(
        `<rect x="${x(s.t - 1)}" y="${top - 8}" width="${(Number(x(s.t)) - Number(x(s.t - 1))).toFixed(1)}" height="6" fill="#E69F00"/>`,
      );
    }
  }
  for (const outcome of OUTCOMES) {
    const points = seconds.map((s) => `${x(s.t - 0.5)},${y(s.counts[outcome])}`).join(' ');
    out.push(
      `<polyline points="${points}" fill="none" stroke="${COLORS[outcome]}" stroke-width="2" stroke-linejoin="round"/>`,
    );
  }
  out.push('</svg>', '');
  return out.join('\n');
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
