// Starts the demo gateway, puts the demo keys under load, and screenshots its status page in headless Chromium.
//
//   pnpm --filter @sentinel/example-gateway exec tsx scripts/screenshot.ts
//
// Writes docs/status-page.png. Needs a Chromium: Debian's `chromium` package at /usr/bin/chromium,
// or CHROMIUM_PATH naming another. LOAD_SECONDS sets how long the load runs (default 60).
import { type ChildProcess, spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const GATEWAY_DIR = fileURLToPath(new URL('..', import.meta.url));
const OUT = fileURLToPath(new URL('../../../docs/status-page.png', import.meta.url));
const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const LOAD_SECONDS = Number(process.env.LOAD_SECONDS) || 60;

/**
 * Requests a second per client, at the peak of a slow wave: ENTERPRISE stays under its limit,
 * PRO outruns its 20-a-second burst and then its minute, FREE and the keyless client (by IP, in
 * the default tier) are limited most of the time.
 */
const CLIENTS: { name: string; headers: Record<string, string>; perSecond: number }[] = [
  { name: 'ENTERPRISE', headers: { 'x-api-key': 'demo-enterprise-key' }, perSecond: 12 },
  { name: 'PRO', headers: { 'x-api-key': 'demo-pro-key' }, perSecond: 24 },
  { name: 'FREE', headers: { 'x-api-key': 'demo-free-key' }, perSecond: 6 },
  { name: 'keyless', headers: {}, perSecond: 3 },
];

/** Starts `pnpm start`'s gateway on a free loopback port; resolves to it and its address. */
async function startGateway(): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: GATEWAY_DIR,
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  process.once('exit', () => child.kill('SIGKILL'));
  let banner = '';
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      banner += chunk;
      const found = /listening on (http:\/\/\S+)/.exec(banner);
      if (found?.[1]) resolve(found[1]);
    });
    child.once('exit', (code) => reject(new Error(`the gateway exited with ${code}`)));
  });
  return { child, url };
}

/** Sends each client's requests, paced open-loop, for `seconds`; returns the answers by status. */
async function load(url: string, seconds: number): Promise<Map<number, number>> {
  const statuses = new Map<number, number>();
  const inFlight: Promise<void>[] = [];
  const started = Date.now();
  for (let second = 0; second < seconds; second++) {
    // A wave between a third and all of each client's rate, so the chart has a shape.
    const level = 2 / 3 + Math.sin((second / seconds) * 3 * Math.PI) / 3;
    for (const { headers, perSecond } of CLIENTS) {
      const n = Math.max(1, Math.round(perSecond * level));
      for (let i = 0; i < n; i++) {
        const at = started + second * 1000 + (i * 1000) / n;
        inFlight.push(
          sleep(Math.max(0, at - Date.now()))
            .then(() => fetch(`${url}/demo`, { headers }))
            .then(async (response) => {
              await response.arrayBuffer();
              statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
            }),
        );
      }
    }
    await sleep(Math.max(0, started + (second + 1) * 1000 - Date.now()));
  }
  await Promise.all(inFlight);
  return statuses;
}

const { child, url } = await startGateway();
const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
try {
  const page = await browser.newPage({
    viewport: { width: 1100, height: 900 },
    deviceScaleFactor: 2,
  });
  await page.goto(`${url}/_sentinel`);
  console.log(
    `status page at ${url}/_sentinel; ${LOAD_SECONDS} s of load from ${CLIENTS.length} clients`,
  );
  const loaded = load(url, LOAD_SECONDS);
  // Taken under load, two seconds before it ends, so the chart's newest seconds are busy.
  await sleep((LOAD_SECONDS - 2) * 1000);
  await page.screenshot({ path: OUT, fullPage: true });
  const statuses = await loaded;
  console.log(`answers by status: ${JSON.stringify(Object.fromEntries(statuses))}`);
  console.log(`wrote ${OUT}`);
} finally {
  await browser.close();
  child.kill('SIGTERM');
}
