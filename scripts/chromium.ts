/**
 * How the console's browser tests (test/console/browser.ts) and screenshots
 * (scripts/console-screenshots.ts) launch Debian's Chromium.
 */

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Flags that keep Chromium headless, root-safe and off the network (its background services would try to reach Google). */
export const CHROMIUM_ARGS = [
  '--headless=new',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-default-apps',
  '--disable-extensions',
  '--metrics-recording-only',
  '--no-default-browser-check',
];
