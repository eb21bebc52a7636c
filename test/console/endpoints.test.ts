// The endpoints list and form: create through the form and watch the badge go live, field errors from the browser's
// rules (no request) and from the server's, and no horizontal page scroll at 380 px.
import { beforeAll, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { TINY_REPO } from '../support/app.js';
import { H100_X1 } from '../support/gateway.js';
import { describeBrowser, startConsole, type ConsoleHarness } from './browser.js';

/** The GraphQL operations the page sends, by operation name. */
function recordOperations(page: Page): string[] {
  const names: string[] = [];
  page.on('request', (request) => {
    if (!request.url().endsWith('/graphql') || request.method() !== 'POST') return;
    const match = /(?:mutation|query)\s+(\w+)/.exec(request.postData() ?? '');
    if (match) names.push(match[1]!);
  });
  return names;
}

/** The error shown beside a labelled field (its aria-describedby). */
async function errorBeside(page: Page, label: string): Promise<string> {
  const input = page.getByLabel(label, { exact: true });
  const ids = (await input.getAttribute('aria-describedby')) ?? '';
  const errorId = ids.split(' ').find((id) => id.endsWith('-error'));
  if (!errorId) return '';
  return page.locator(`[id="${errorId}"]`).innerText();
}

async function noHorizontalScroll(page: Page): Promise<void> {
  const { scrollWidth, clientWidth } = await page.evaluate(() => ({
    scrollWidth: document.documentElement.scrollWidth,
    clientWidth: document.documentElement.clientWidth,
  }));
  expect(scrollWidth).toBeLessThanOrEqual(clientWidth);
}

describeBrowser('web console: endpoints list and form', () => {
  let h: ConsoleHarness;
  beforeAll(async () => {
    h = await startConsole();
  }, 120_000);

  it('creates an endpoint through the form and shows it reaching RUNNING in the list without a reload', async () => {
    const page = await h.signedIn();
    await page.getByRole('link', { name: 'New endpoint in console' }).click();
    await page.getByRole('heading', { name: 'New endpoint' }).waitFor();
    expect(await page.getByLabel('Project', { exact: true }).inputValue()).toBe(h.project.id);
    await page.getByLabel('Name', { exact: true }).fill('from-the-form');
    await page.getByLabel('Hub model repository').fill(TINY_REPO);
    await page.getByLabel('Min replicas').fill('1');
    await page.getByLabel('Max replicas').fill('1');
    await page.getByLabel('Initial version comment').fill('made in the console');
    await page.getByRole('button', { name: 'Create endpoint' }).click();
    await page.waitForURL(/#\/endpoints\/(?!new$)[^/]+$/);
    const id = /#\/endpoints\/([^/?]+)$/.exec(page.url())![1]!;

    // Back to the list in the page (no reload): a marker in the window survives only without one.
    await page.evaluate(() => ((window as unknown as { sameDocument: boolean }).sameDocument = true));
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Endpoints' }).click();
    const row = page.locator(`tr[data-endpoint-id="${id}"]`);
    await row.waitFor();
    expect(await row.getByRole('link', { name: 'from-the-form' }).getAttribute('href')).toBe(`#/endpoints/${id}`);
    expect(await row.innerText()).toContain(TINY_REPO);
    await expect.poll(() => row.locator('[data-status]').getAttribute('data-status'), { timeout: 90_000, interval: 250 }).toBe('RUNNING');
    await expect.poll(() => row.locator('[data-replicas]').getAttribute('data-replicas'), { timeout: 30_000 }).toBe('1/1');
    // A change made elsewhere reaches the open list too.
    await h.user.graphql.request('mutation($id: ID!) { sleepEndpoint(id: $id) { __typename } }', { id });
    await expect.poll(() => row.locator('[data-status]').getAttribute('data-status'), { timeout: 60_000, interval: 250 }).toBe('SLEEPING');
    expect(await page.evaluate(() => (window as unknown as { sameDocument?: boolean }).sameDocument)).toBe(true);
  }, 150_000);

  it("answers a bad form with errors beside the fields: the browser's rules without a request, then the server's", async () => {
    const page = await h.signedIn();
    const operations = recordOperations(page);
    await page.getByRole('link', { name: 'New endpoint in console' }).click();
    await page.getByLabel('Hub model repository').waitFor();
    await page.getByLabel('Hub model repository').fill('not a repo!');
    await page.getByLabel('Min replicas').fill('3');
    await page.getByLabel('Max replicas').fill('1');
    await page.getByRole('button', { name: 'Create endpoint' }).click();

    await expect.poll(() => errorBeside(page, 'Name')).toBe('must not be empty');
    expect(await errorBeside(page, 'Hub model repository')).toContain("must be a model id such as 'org/model'");
    expect(await page.getByLabel('Name', { exact: true }).getAttribute('aria-invalid')).toBe('true');
    // As on the server, the rules across fields run once every field passes its own.
    expect(await errorBeside(page, 'Min replicas')).toBe('');
    expect(await page.getByLabel('Name', { exact: true }).evaluate((el) => el === document.activeElement)).toBe(true);
    await page.getByLabel('Name', { exact: true }).fill('bad-scaling');
    await page.getByLabel('Hub model repository').fill(TINY_REPO);
    await page.getByRole('button', { name: 'Create endpoint' }).click();
    await expect.poll(() => errorBeside(page, 'Min replicas')).toBe('must not exceed maxReplica (3 > 1)');
    expect(await errorBeside(page, 'Name')).toBe('');
    // The first invalid field has the focus, and nothing was sent.
    expect(await page.getByLabel('Min replicas').evaluate((el) => el === document.activeElement)).toBe(true);
    expect(operations.filter((name) => name.startsWith('EndpointsCreate'))).toEqual([]);

    // A rule only the server can check: this endpoint's input limit was fixed at 2048, which the console cannot know
    // (it equals what following the total limit gives), so lowering the total limit passes here and the server refuses.
    const created = await h.user.rest('POST', '/dedicated/beta/endpoint', {
      projectId: h.project.id,
      name: 'fixed-input',
      instanceOptionId: H100_X1,
      hfModelRepo: TINY_REPO,
      advanced: { max_token_count: 4096, max_input_length: 2048 },
      autoscalingPolicy: { minReplica: 0, maxReplica: 1 },
    });
    expect(created.status).toBe(200);
    const id = created.body.endpointId as string;
    await page.goto(`${h.app.url}/#/endpoints/${id}/edit`);
    await page.getByRole('button', { name: 'Save new version' }).waitFor();
    expect(await page.getByLabel('Name', { exact: true }).inputValue()).toBe('fixed-input');
    await page.getByText('Advanced', { exact: true }).click();
    await page.getByLabel('Max token count').fill('1000');
    await page.getByRole('button', { name: 'Save new version' }).click();
    await expect.poll(() => errorBeside(page, 'Max input length')).toBe('must not exceed maxTokenCount (2048 > 1000)');
    expect(operations).toContain('EndpointsUpdate');
    expect(await page.getByLabel('Max input length').evaluate((el) => el === document.activeElement)).toBe(true);

    // A change the rules accept goes through and lands on the endpoint's page.
    await page.getByLabel('Max input length').fill('512');
    await page.getByLabel('Version comment').fill('smaller limits');
    await page.getByRole('button', { name: 'Save new version' }).click();
    await page.waitForURL(new RegExp(`#/endpoints/${id}$`));
    const [version] = await h.app.sql<{ max_token_count: number; max_input_length: number; comment: string }[]>`
      SELECT max_token_count, max_input_length, comment FROM endpoint_versions WHERE endpoint_id = ${id}
      ORDER BY version_index DESC LIMIT 1`;
    expect(version).toEqual({ max_token_count: 1000, max_input_length: 512, comment: 'smaller limits' });
  }, 90_000);

  it('has no horizontal page scroll at 380 px, on the list and on the form', async () => {
    const page = await h.signedIn({ width: 380, height: 800 });
    await page.getByRole('heading', { name: 'console' }).waitFor();
    await page.locator('table, .empty').first().waitFor();
    await noHorizontalScroll(page);
    await page.getByRole('link', { name: 'New endpoint in console' }).click();
    await page.getByLabel('Hub model repository').waitFor();
    await page.getByText('Advanced', { exact: true }).click();
    await page.getByLabel('Max token count').waitFor();
    await noHorizontalScroll(page);
  }, 60_000);
});
