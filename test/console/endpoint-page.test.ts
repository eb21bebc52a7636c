// The endpoint page: live status without reload, the event timeline, version history with diffs and rollback, lifecycle buttons.
import { beforeAll, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { isAllowed, type EndpointStatus, type LifecycleAction } from '../../src/domain/lifecycle.js';
import { TINY_REPO } from '../support/app.js';
import { createBody } from '../support/gateway.js';
import { describeBrowser, startConsole, type ConsoleHarness } from './browser.js';

const ACTIONS: Array<[LifecycleAction, string]> = [
  ['sleep', 'Sleep'],
  ['wake', 'Wake'],
  ['restart', 'Restart'],
  ['terminate', 'Terminate'],
  ['delete', 'Delete'],
];

async function shownStatus(page: Page): Promise<string | null> {
  return page.getByTestId('endpoint-status').locator('[data-status]').getAttribute('data-status');
}

/** Whether each lifecycle button's disabled state is what the lifecycle allows from the status the page shows. */
async function expectButtonsMatch(page: Page, status: EndpointStatus) {
  const group = page.getByRole('group', { name: 'Lifecycle actions' });
  for (const [action, label] of ACTIONS) {
    await expect
      .poll(() => group.getByRole('button', { name: label, exact: true }).isEnabled(), { message: `${label} from ${status}` })
      .toBe(isAllowed(action, status));
  }
}

function version(page: Page, index: number) {
  return page.locator(`li.version[data-version="${index}"]`);
}

describeBrowser('web console: endpoint page', () => {
  let h: ConsoleHarness;
  let id: string;
  // The model comes slowly (4 KiB every 250 ms: 28 s for all of it) until the page is open, then at once: the page must
  // see the endpoint start, and an engine can be ready in under a second.
  const slowModel = { type: 'slow' as const, chunkBytes: 4 * 1024, delayMs: 250 };
  beforeAll(async () => {
    h = await startConsole();
    h.app.hub.setFault(slowModel, { repo: TINY_REPO, on: ['cdn'], times: 1 });
    const response = await h.user.rest(
      'POST',
      '/dedicated/beta/endpoint',
      createBody(h.project.id, {
        name: 'page-demo',
        hfModelRepo: TINY_REPO,
        autoscalingPolicy: { minReplica: 1, maxReplica: 1 },
        advanced: { max_batch_size: 4 },
        initialVersionComment: 'first',
      }),
    );
    expect(response.status).toBe(200);
    id = response.body.endpointId as string;
  }, 90_000);

  it('follows the status live, shows events, versions with diffs, rollback, sleep and wake', async () => {
    const page = await h.signedIn();
    await page.goto(`${h.app.url}/#/endpoints/${id}`);
    await page.getByRole('heading', { level: 1, name: 'page-demo' }).waitFor();
    await expect(page.getByRole('link', { name: 'Edit' }).getAttribute('href')).resolves.toBe(`#/endpoints/${id}/edit`);
    await expect(page.getByRole('link', { name: 'Open in playground' }).getAttribute('href')).resolves.toBe(`#/playground/${id}`);

    // Live: RUNNING without a reload, and the timeline shows what happened meanwhile.
    const timeline = page.getByRole('list', { name: 'Endpoint events' });
    await expect.poll(() => timeline.getByRole('listitem').count(), { timeout: 30_000 }).toBeGreaterThan(0);
    expect(await shownStatus(page)).not.toBe('RUNNING');
    slowModel.delayMs = 0;
    await expect.poll(() => shownStatus(page), { timeout: 90_000, interval: 500 }).toBe('RUNNING');
    await expectButtonsMatch(page, 'RUNNING');
    // The timeline loads beside the status (its own query and subscription): seconds on a busy machine.
    await expect.poll(() => timeline.getByRole('listitem').count(), { timeout: 30_000 }).toBeGreaterThan(1);
    await expect.poll(() => timeline.innerText(), { timeout: 30_000 }).toContain('Status changed');

    // The spec.
    await expect.poll(() => page.getByRole('region', { name: 'Spec' }).innerText()).toContain(TINY_REPO);

    // Sleep: the badge follows, Wake enabled and Sleep disabled.
    const lifecycle = page.getByRole('group', { name: 'Lifecycle actions' });
    await lifecycle.getByRole('button', { name: 'Sleep', exact: true }).click();
    await expect.poll(() => shownStatus(page), { timeout: 60_000, interval: 300 }).toBe('SLEEPING');
    await expectButtonsMatch(page, 'SLEEPING');
    expect(await lifecycle.getByRole('button', { name: 'Wake', exact: true }).isEnabled()).toBe(true);
    expect(await lifecycle.getByRole('button', { name: 'Sleep', exact: true }).isEnabled()).toBe(false);

    // The versions are made while it sleeps: an update of a running endpoint would roll out a new engine for each
    // (two engine starts, and their waits), which the page shows nothing more of than this.
    // An update through the API: version 1 appears, with its diff.
    await expect(version(page, 0).innerText()).resolves.toContain('first');
    const updated = await h.user.rest('PUT', `/dedicated/beta/endpoint/${id}`, {
      advanced: { max_batch_size: 2 },
      newVersionComment: 'smaller batches',
    });
    expect(updated.status).toBe(200);
    await version(page, 1).waitFor({ timeout: 30_000 });
    await expect.poll(() => version(page, 1).innerText()).toContain('smaller batches');
    const diff1 = version(page, 1).getByRole('list', { name: 'Changes in version 1' });
    await expect.poll(() => diff1.innerText()).toMatch(/Max batch size: 4\s*→?\s*(to)?\s*2/);

    // Rollback to version 0: version 2 restores the value.
    await version(page, 0).getByRole('button', { name: 'Roll back to version 0' }).click();
    await version(page, 2).waitFor({ timeout: 30_000 });
    await expect.poll(() => version(page, 2).innerText()).toContain('rollback to version 0');
    await expect
      .poll(() => version(page, 2).getByRole('list', { name: 'Changes in version 2' }).innerText())
      .toMatch(/Max batch size: 2\s*→?\s*(to)?\s*4/);
    // The newest version has no Rollback button; older ones do.
    expect(
      await version(page, 2)
        .getByRole('button', { name: /Roll back/ })
        .count(),
    ).toBe(0);
    expect(await version(page, 1).getByRole('button', { name: 'Roll back to version 1' }).count()).toBe(1);
    await expect.poll(() => shownStatus(page)).toBe('SLEEPING');

    // Wake: AWAKING, then RUNNING.
    await lifecycle.getByRole('button', { name: 'Wake', exact: true }).click();
    await expect.poll(() => shownStatus(page), { timeout: 90_000, interval: 500 }).toBe('RUNNING');
    await expectButtonsMatch(page, 'RUNNING');
    await expect.poll(() => timeline.innerText()).toMatch(/AWAKING/);

    // Terminate asks first; Cancel leaves it running.
    await lifecycle.getByRole('button', { name: 'Terminate', exact: true }).click();
    const confirm = page.getByRole('alertdialog');
    await expect.poll(() => confirm.innerText()).toContain('page-demo');
    await confirm.getByRole('button', { name: 'Cancel' }).click();
    expect(await confirm.count()).toBe(0);
    // Keyboard: the confirmation takes the focus, Escape closes it and gives the focus back.
    await lifecycle.getByRole('button', { name: 'Delete', exact: true }).click();
    await expect.poll(() => page.evaluate(() => document.activeElement?.textContent)).toBe('Yes, delete');
    await page.keyboard.press('Escape');
    expect(await confirm.count()).toBe(0);
    await expect.poll(() => page.evaluate(() => document.activeElement?.textContent)).toBe('Delete');

    // The charts and the request activity are there, with their text summaries.
    const metrics = page.getByRole('region', { name: 'Metrics' });
    await metrics.getByRole('heading', { name: 'Throughput' }).waitFor();
    expect(await metrics.locator('canvas').count()).toBeGreaterThan(0);
    await page.getByRole('region', { name: 'Request activity' }).waitFor();
  }, 360_000);

  it('shows a failure with its code and message, and only the actions a failed endpoint allows', async () => {
    const response = await h.user.rest('POST', '/dedicated/beta/endpoint', {
      projectId: h.project.id,
      name: 'no-weights',
      instanceOptionId: 'TwD5AqnBSVN0',
      hfModelRepo: 'test-org/no-weights',
      advanced: {},
    });
    expect(response.status).toBe(200);
    const failing = response.body.endpointId as string;
    const page = await h.signedIn();
    await page.goto(`${h.app.url}/#/endpoints/${failing}`);
    await expect.poll(() => shownStatus(page), { timeout: 60_000, interval: 500 }).toBe('FAILED');
    const failure = page.locator('.endpoint-failure');
    await expect.poll(() => failure.innerText()).toMatch(/WORKLOAD_INIT_\w+ — \S+/);
    await expectButtonsMatch(page, 'FAILED');
    expect(await page.getByRole('button', { name: 'Restart', exact: true }).isEnabled()).toBe(true);
  }, 90_000);

  it('pages the version history from the server, newest first, each shown version diffed with the one before', async () => {
    const response = await h.user.rest(
      'POST',
      '/dedicated/beta/endpoint',
      createBody(h.project.id, {
        name: 'many-versions',
        hfModelRepo: TINY_REPO,
        autoscalingPolicy: { minReplica: 0, maxReplica: 1 },
        advanced: { max_batch_size: 1 },
      }),
    );
    expect(response.status).toBe(200);
    const many = response.body.endpointId as string;
    for (let n = 2; n <= 13; n++) {
      const updated = await h.user.rest('PUT', `/dedicated/beta/endpoint/${many}`, {
        advanced: { max_batch_size: n },
        newVersionComment: `batch ${n}`,
      });
      expect(updated.status, JSON.stringify(updated.body)).toBe(200);
    }
    const page = await h.signedIn();
    await page.goto(`${h.app.url}/#/endpoints/${many}`);
    await version(page, 12).waitFor();
    // The newest ten, and the eleventh read only to diff the tenth.
    await expect.poll(() => page.locator('li.version').count()).toBe(10);
    expect(await version(page, 3).innerText()).toMatch(/Max batch size: 3\s*→?\s*(to)?\s*4/);
    await page.getByRole('button', { name: 'Show older versions' }).click();
    await expect.poll(() => page.locator('li.version').count()).toBe(13);
    expect(await version(page, 1).innerText()).toMatch(/Max batch size: 1\s*→?\s*(to)?\s*2/);
    expect(await version(page, 0).innerText()).toContain('The first version.');
    expect(await page.getByRole('button', { name: 'Show older versions' }).count()).toBe(0);
    // A new version reloads the list from the top: what was opened stays open (before, it fell back to the newest ten,
    // also whenever the controller rolled a version out while the page was open).
    expect((await h.user.rest('PUT', `/dedicated/beta/endpoint/${many}`, { advanced: { max_batch_size: 14 } })).status).toBe(200);
    await version(page, 13).waitFor();
    await expect.poll(() => page.locator('li.version').count()).toBe(14);
    expect(await page.getByRole('button', { name: 'Show older versions' }).count()).toBe(0);
    // Older versions asked for while a new version comes in (its reload from the top races the older page's read):
    // what was asked stays shown, each version once.
    await page.reload();
    await version(page, 13).waitFor();
    await expect.poll(() => page.locator('li.version').count()).toBe(10);
    const [, put] = await Promise.all([
      page.getByRole('button', { name: 'Show older versions' }).click(),
      h.user.rest('PUT', `/dedicated/beta/endpoint/${many}`, { advanced: { max_batch_size: 15 } }),
    ]);
    expect(put.status).toBe(200);
    await version(page, 14).waitFor();
    await expect.poll(() => page.locator('li.version').count()).toBe(15);
    await version(page, 0).waitFor();
  }, 60_000);

  it('fits 380 px without horizontal scrolling', async () => {
    const page = await h.signedIn({ width: 380, height: 800 });
    await page.goto(`${h.app.url}/#/endpoints/${id}`);
    await page.getByRole('heading', { level: 1, name: 'page-demo' }).waitFor();
    await page.getByRole('region', { name: 'Metrics' }).getByRole('heading', { name: 'Throughput' }).waitFor();
    await page.locator('li.version[data-version="0"]').waitFor();
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    expect(overflow).toBeLessThanOrEqual(0);
  }, 60_000);

  it('deletes after confirmation and goes back to the list', async () => {
    const page = await h.signedIn();
    await page.goto(`${h.app.url}/#/endpoints/${id}`);
    await page.getByRole('heading', { level: 1, name: 'page-demo' }).waitFor();
    await page.getByRole('group', { name: 'Lifecycle actions' }).getByRole('button', { name: 'Delete', exact: true }).click();
    await page.getByRole('alertdialog').getByRole('button', { name: 'Yes, delete' }).click();
    await expect.poll(() => new URL(page.url()).hash).toBe('#/');
    const gone = await h.user.rest('GET', `/dedicated/beta/endpoint/${id}`);
    expect(gone.status).toBe(404);
  }, 60_000);
});
