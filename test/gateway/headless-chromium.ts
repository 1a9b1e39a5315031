// Debian's chromium, headless, driven by playwright-core: the gateway example's dev dependency, so resolved from there.
import { createRequire } from 'node:module';
import type * as Playwright from '../../examples/gateway/node_modules/playwright-core/index.js';

export type { Browser, Page } from '../../examples/gateway/node_modules/playwright-core/index.js';

const fromGateway = createRequire(new URL('../../examples/gateway/package.json', import.meta.url));
const { chromium } = fromGateway('playwright-core') as typeof Playwright;

/** Where Debian's chromium package puts the browser; CHROMIUM_PATH names another. */
export const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

/** A browser for one test; close it in `finally` or an afterEach. */
export function launchChromium(): Promise<Playwright.Browser> {
  // No sandbox: CI runs as root in a container, where Chromium's sandbox cannot start.
  return chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
}
