// Debian's chromium, headless, driven by playwright-core, which ships no browser of its own.
import { type Browser, chromium } from 'playwright-core';

export type { Browser, Page } from 'playwright-core';

/** Where Debian's chromium package puts the browser; CHROMIUM_PATH names another. */
export const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

/** A browser for one test; close it in `finally` or an afterEach. */
export function launchChromium(): Promise<Browser> {
  // No sandbox: CI runs as root in a container, where Chromium's sandbox cannot start.
  return chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
}
