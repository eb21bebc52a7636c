/**
 * The browser tests' harness: Debian's Chromium driven by playwright-core,
 * headless and kept off the network, against a real gateway (real database,
 * controller and engines on the tiny model) serving the console, built from
 * the sources once for the run. Without Chromium the suites skip and
 * say why, so `npm test` passes on a machine that lacks it; under CI (`CI`
 * set, as CI sets it) they fail instead: a green run there means they ran.
 */
import { existsSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';
import { beforeAll, describe, expect, inject } from 'vitest';
import { onCleanup } from '../support/cleanup.js';
import { startTestApp, type TestApp, type TestAppOptions } from '../support/app.js';
import type { SeededUser } from '../support/gateway.js';
import { CHROMIUM_ARGS, CHROMIUM_PATH } from '../../scripts/chromium.js';

export { CHROMIUM_PATH };
const hasChromium = existsSync(CHROMIUM_PATH);

/** Whether this run is CI's (CI sets `CI`, usually to `true`): there a browser test that cannot run fails. */
const underCI = !['', '0', 'false'].includes((process.env.CI ?? '').toLowerCase());

/** `describe`, or a skipped suite that names what is missing (a failing one under CI). */
export function describeBrowser(name: string, body: () => void): void {
  if (hasChromium) return void describe(name, body);
  if (underCI) {
    // Registered first, so that it fails the suite before the body's own setup starts a gateway: every test fails with it.
    return void describe(name, () => {
      beforeAll(() => {
        throw new Error(
          `no Chromium at ${CHROMIUM_PATH}: under CI the browser tests must run (apt-get install chromium, or set CHROMIUM_PATH)`,
        );
      });
      body();
    });
  }
  console.warn(`[browser tests] skipped: no Chromium at ${CHROMIUM_PATH} (apt-get install chromium, or set CHROMIUM_PATH)`);
  describe.skip(`${name} — skipped: no Chromium at ${CHROMIUM_PATH}`, body);
}

export interface ConsoleHarness {
  app: TestApp;
  browser: Browser;
  user: SeededUser;
  project: { id: string };
  /** A fresh page (its own context: nothing in session storage); errors in the page and CSP violations fail the test. */
  newPage(options?: { width?: number; height?: number }): Promise<Page>;
  /** A fresh page, signed in with the user's key, on the endpoints list. */
  signedIn(options?: { width?: number; height?: number }): Promise<Page>;
}

export async function startConsole(options: TestAppOptions = {}): Promise<ConsoleHarness> {
  // The console as its sources are now, built once for the run (test/support/global-setup.ts).
  const app = await startTestApp({ consoleDir: inject('consoleBuild'), ...options });
  const browser = await chromium.launch({ executablePath: CHROMIUM_PATH, headless: true, args: CHROMIUM_ARGS });
  onCleanup(() => browser.close());
  const user = await app.seed.user();
  const project = await user.project('console');
  const pageErrors: string[] = [];
  const newPage = async ({ width = 1280, height = 900 } = {}) => {
    const context = await browser.newContext({ viewport: { width, height }, reducedMotion: 'reduce' });
    const page = await context.newPage();
    page.setDefaultTimeout(20_000);
    page.on('pageerror', (error) => pageErrors.push(error.message));
    // Whatever the console's Content-Security-Policy refuses (an inline style, a script, a connection elsewhere) is a bug.
    page.on('console', (message) => {
      if (message.type() === 'error' && message.text().includes('Content Security Policy')) pageErrors.push(message.text());
    });
    onCleanup(() => {
      // An uncaught exception in the page, or a CSP violation, is a bug even when the test's assertions passed.
      expect(pageErrors, 'uncaught errors and CSP violations in the page').toEqual([]);
    });
    await page.goto(app.url);
    return page;
  };
  return {
    app,
    browser,
    user,
    project,
    newPage,
    async signedIn(size) {
      const page = await newPage(size);
      await page.getByLabel('API key').fill(user.key);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('navigation', { name: 'Main' }).waitFor();
      return page;
    },
  };
}
