// The console's shell: served at / with its security headers, sign-in refuses a bad key, keeps a good one for the tab only.
import { beforeAll, expect, it } from 'vitest';
import { describeBrowser, startConsole, type ConsoleHarness } from './browser.js';

describeBrowser('web console: shell', () => {
  let h: ConsoleHarness;
  beforeAll(async () => {
    h = await startConsole();
  }, 90_000);

  it('serves the page at / with a strict CSP, and its hashed assets as immutable', async () => {
    const page = await fetch(`${h.app.url}/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(page.headers.get('cache-control')).toBe('no-cache');
    const html = await page.text();
    const asset = /src="(\/assets\/[^"]+\.js)"/.exec(html)?.[1];
    expect(asset).toBeDefined();
    const script = await fetch(`${h.app.url}${asset}`);
    expect(script.status).toBe(200);
    expect(script.headers.get('content-type')).toContain('javascript');
    expect(script.headers.get('cache-control')).toContain('immutable');
    expect((await fetch(`${h.app.url}/assets/../../package.json`)).status).toBe(404);
    expect((await fetch(`${h.app.url}/`, { method: 'POST' })).status).toBe(405);
  });

  it('allows no inline style: one injected into the page is refused, and reported as the violation it is', async () => {
    const policy = (await fetch(`${h.app.url}/`)).headers.get('content-security-policy') ?? '';
    expect(policy).toContain("style-src 'self'");
    expect(policy).not.toContain('unsafe-inline');
    const page = await h.browser.newPage();
    const violations: string[] = [];
    page.on('console', (message) => {
      if (message.text().includes('Content Security Policy')) violations.push(message.text());
    });
    await page.goto(h.app.url);
    const color = await page.evaluate(() => {
      const style = document.createElement('style');
      style.textContent = 'body { color: rgb(1, 2, 3) !important; }';
      document.head.append(style);
      return getComputedStyle(document.body).color;
    });
    expect(color).not.toBe('rgb(1, 2, 3)');
    await expect.poll(() => violations.length).toBeGreaterThan(0);
    await page.close();
  });

  it('refuses a wrong key beside the field, signs in with a good one, and signs out', async () => {
    const page = await h.newPage();
    // The hint shows its commands as code, not as Markdown backticks (issue 32).
    const hint = page.locator('.hint');
    expect(await hint.innerText()).toBe(
      'The key npm start printed at first start, or one from npm run admin -- create-key. It is kept only in this tab.',
    );
    expect(await hint.locator('code').allInnerTexts()).toEqual(['npm start', 'npm run admin -- create-key']);
    await page.getByLabel('API key').fill('dek_not-a-real-key');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('alert').innerText()).toContain('not valid');
    expect(await page.getByLabel('API key').getAttribute('aria-invalid')).toBe('true');

    await page.getByLabel('API key').fill(h.user.key);
    await page.keyboard.press('Enter');
    await page.getByRole('navigation', { name: 'Main' }).waitFor();
    expect(await page.getByLabel('Team').inputValue()).toBe(h.user.teamId);
    // Kept for this tab only: a reload stays signed in.
    await page.reload();
    await page.getByRole('navigation', { name: 'Main' }).waitFor();
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('API key').waitFor();
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
  });
});
