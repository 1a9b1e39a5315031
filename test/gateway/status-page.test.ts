// The status page in headless Chromium: the tiers it renders, its live chart under load, and who may open it.
import { afterEach, describe, expect, it } from 'vitest';
import { configFile, startGateway } from './gateway-process.ts';
import { type Browser, launchChromium, type Page } from './headless-chromium.ts';

const TOKEN = 'test-admin-token-0123456789';
const FREE = { 'x-api-key': 'demo-free-key' };

const browsers: Browser[] = [];
afterEach(async () => {
  await Promise.all(browsers.splice(0).map((browser) => browser.close()));
});

async function browser(): Promise<Browser> {
  const launched = await launchChromium();
  browsers.push(launched);
  return launched;
}

/** The page's running totals, as it shows them. */
async function totals(page: Page): Promise<Record<string, number>> {
  const shown: Record<string, number> = {};
  for (const outcome of ['allowed', 'limited', 'degraded']) {
    shown[outcome] = Number(await page.locator(`[data-total="${outcome}"]`).textContent());
  }
  return shown;
}

/** Waits until the page shows this total: it polls every second, so 10 s is ten polls. */
async function shown(page: Page, outcome: string, total: string): Promise<void> {
  await page
    .locator(`[data-total="${outcome}"]`, { hasText: new RegExp(`^${total}$`) })
    .waitFor({ timeout: 10_000 });
}

/** Waits until the page's script has drawn from /_sentinel/stats at least once. */
async function live(page: Page): Promise<void> {
  await page.waitForSelector('#connection[data-state="live"]', { timeout: 10_000 });
}

describe('the status page', () => {
  it('renders every tier with its policies, as the limiter resolved them', async () => {
    const gateway = await startGateway();
    expect(gateway.output().stdout).toContain(`status:   ${gateway.url}/_sentinel`);
    const page = await (await browser()).newPage();
    const response = await page.goto(`${gateway.url}/_sentinel`);
    expect(response?.status()).toBe(200);
    expect(await page.title()).toBe('Sentinel gateway');
    const rows = await page
      .locator('#tiers tbody tr')
      .evaluateAll((trs) =>
        trs.map((tr) => [tr.getAttribute('data-tier'), tr.getAttribute('data-policy')]),
      );
    expect(rows).toEqual([
      ['FREE', 'free-minute'],
      ['PRO', 'pro-minute'],
      ['PRO', 'pro-burst'],
      ['ENTERPRISE', 'enterprise-minute'],
    ]);
    const text = await page.locator('#tiers').textContent();
    for (const shown of ['FREE', 'PRO', 'ENTERPRISE', 'per 1m', 'per 1s', 'gcra', '1000']) {
      expect(text).toContain(shown);
    }
  }, 60_000);

  it('charts a demo key’s allowed and limited decisions as they happen, naming it by digest only', async () => {
    const { url } = await startGateway();
    const page = await (await browser()).newPage();
    await page.goto(`${url}/_sentinel`);
    await live(page);
    expect(await totals(page)).toEqual({ allowed: 0, limited: 0, degraded: 0 });

    // FREE admits 10 a minute: 15 requests are 10 allowed and 5 limited.
    const answers = [];
    for (let i = 0; i < 15; i++)
      answers.push((await fetch(`${url}/hello`, { headers: FREE })).status);
    expect(answers.filter((status) => status === 429)).toHaveLength(5);

    await shown(page, 'limited', '5');
    expect(await totals(page)).toEqual({ allowed: 10, limited: 5, degraded: 0 });
    // Each line has a point per second of the five minutes but the one still filling; once that
    // second is complete, the limited line leaves the floor.
    const chartLines = () =>
      page.locator('#chart polyline').evaluateAll((polylines) =>
        polylines.map((line) => ({
          outcome: line.getAttribute('class') as string,
          ys: (line.getAttribute('points') ?? '')
            .split(' ')
            .map((point: string) => Number(point.split(',')[1])),
        })),
      );
    const lines = await chartLines();
    expect(lines.map(({ outcome }) => outcome)).toEqual(['allowed', 'limited', 'degraded']);
    for (const { ys } of lines) expect(ys).toHaveLength(299);
    await expect
      .poll(
        async () => {
          const limited = (await chartLines())[1]?.ys ?? [];
          return Math.max(...limited) - Math.min(...limited);
        },
        { timeout: 10_000 },
      )
      .toBeGreaterThan(0);

    const mostLimited = await page
      .locator('#most-limited tr')
      .evaluateAll((rows) =>
        rows.map((row) => [...row.querySelectorAll('td')].map((cell) => cell.textContent)),
      );
    expect(mostLimited).toEqual([[expect.stringMatching(/^[0-9a-f]{12}$/), 'FREE', '5']]);
    expect(await page.content()).not.toContain('demo-free-key');
  }, 60_000);

  it('is off under a configuration file unless statusPage is true', async () => {
    const keys = 'keys:\n  config-key-1: FREE\n';
    const off = await startGateway({}, ['--config', configFile('gateway.yaml', keys)]);
    expect(off.output().stdout).not.toContain('/_sentinel');
    // Not the gateway's page: the path goes upstream like any other.
    const proxied = await fetch(`${off.url}/_sentinel`, {
      headers: { 'x-api-key': 'config-key-1' },
    });
    expect(await proxied.json()).toMatchObject({ upstream: 'echo', path: '/_sentinel' });

    const on = await startGateway({}, [
      '--config',
      configFile('gateway.yaml', `${keys}statusPage: true\n`),
    ]);
    const page = await fetch(`${on.url}/_sentinel`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toContain('text/html');
    expect(page.headers.get('ratelimit')).toBeNull();
  }, 60_000);

  it('asks for the admin token when the gateway listens beyond loopback, with a login prompt a browser can answer', async () => {
    const gateway = await startGateway({
      HOST: '0.0.0.0',
      SENTINEL_STATUS_PAGE: '1',
      SENTINEL_ADMIN_TOKEN: TOKEN,
    });
    const url = gateway.url.replace('0.0.0.0', '127.0.0.1');
    expect(gateway.output().stdout).toContain('/_sentinel  (asks for the admin token)');
    for (const path of ['/_sentinel', '/_sentinel/stats']) {
      const refused = await fetch(`${url}${path}`);
      expect(refused.status).toBe(401);
      expect(refused.headers.get('www-authenticate')).toMatch(/^Basic realm="Sentinel"/);
      const wrong = await fetch(`${url}${path}`, {
        headers: { authorization: `Basic ${btoa('admin:not-the-token-000000')}` },
      });
      expect(wrong.status).toBe(401);
      const bearer = await fetch(`${url}${path}`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      expect(bearer.status).toBe(200);
    }

    // The browser sends the Basic credentials with the page's own polls too.
    const context = await (await browser()).newContext({
      httpCredentials: { username: 'admin', password: TOKEN },
    });
    const page = await context.newPage();
    expect((await page.goto(`${url}/_sentinel`))?.status()).toBe(200);
    await live(page);
    await fetch(`${url}/hello`, { headers: FREE });
    await shown(page, 'allowed', '1');
  }, 60_000);
});
