/**
 * Screenshots of the web console's main pages for the README (docs/console/),
 * taken with Debian's Chromium against a sandbox gateway (scripts/sandbox.ts)
 * serving one running endpoint of the tiny model with some traffic.
 *
 *   npm run build && npx tsx scripts/console-screenshots.ts
 */
import { mkdir } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { chromium, type Page } from 'playwright-core';
import { instanceOptionFor } from '../src/domain/instance-catalog.js';
import { CHROMIUM_ARGS, CHROMIUM_PATH } from './chromium.js';
import { startSandbox, TINY_REPO } from './sandbox.js';

const OUT = new URL('../docs/console/', import.meta.url);
const sandbox = await startSandbox();
const auth = { authorization: `Bearer ${sandbox.key}`, 'content-type': 'application/json' };
const call = async (method: string, path: string, body?: unknown) => {
  const response = await fetch(`${sandbox.url}${path}`, { method, headers: auth, ...(body ? { body: JSON.stringify(body) } : {}) });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`);
  return JSON.parse(text) as Record<string, unknown>;
};

try {
  const project = (await call('POST', '/graphql', {
    query: 'mutation($teamId: ID) { createProject(name: "chat-apps", teamId: $teamId) { ... on CreateProjectSuccess { project { id } } } }',
    variables: { teamId: sandbox.teamId },
  })) as unknown as { data: { createProject: { project: { id: string } } } };
  const projectId = project.data.createProject.project.id;
  const created = await call('POST', '/dedicated/beta/endpoint', {
    projectId,
    name: 'tiny-chat',
    instanceOptionId: instanceOptionFor('H100', 1).id,
    hfModelRepo: TINY_REPO,
    autoscalingPolicy: { minReplica: 1, maxReplica: 2, cooldownPeriod: 300 },
    advanced: { max_batch_size: 4 },
    initialVersionComment: 'first version',
  });
  const id = String(created.endpointId);
  for (let i = 0; ; i++) {
    const status = await call('GET', `/dedicated/beta/endpoint/${id}/status`);
    if (status.status === 'RUNNING') break;
    if (i > 600) throw new Error(`endpoint stayed ${status.status}`);
    await sleep(200);
  }
  for (let i = 0; i < 12; i++) {
    await call('POST', '/dedicated/v1/chat/completions', {
      model: id,
      messages: [{ role: 'user', content: `hello ${i}` }],
      max_tokens: 24,
    });
  }
  await call('PUT', `/dedicated/beta/endpoint/${id}`, { advanced: { max_batch_size: 8 }, newVersionComment: 'larger batches' });

  await mkdir(OUT, { recursive: true });
  const browser = await chromium.launch({ executablePath: CHROMIUM_PATH, args: CHROMIUM_ARGS });
  const shot = async (page: Page, name: string) => {
    await sleep(400);
    await page.screenshot({ path: new URL(`${name}.png`, OUT).pathname, fullPage: true });
    console.log(`docs/console/${name}.png`);
  };
  const open = async (width: number, height: number) => {
    const page = await (await browser.newContext({ viewport: { width, height }, colorScheme: 'light' })).newPage();
    await page.goto(sandbox.url);
    return page;
  };
  const page = await open(1280, 800);
  await shot(page, 'sign-in');
  await page.getByLabel('API key').fill(sandbox.key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator(`tr[data-endpoint-id="${id}"] [data-status="RUNNING"]`).waitFor();
  await shot(page, 'endpoints');
  await page.getByRole('link', { name: 'New endpoint in chat-apps' }).click();
  await page.getByRole('button', { name: 'Create endpoint' }).click();
  await shot(page, 'create-form-errors');
  await page.goto(`${sandbox.url}/#/endpoints/${id}`);
  await page.getByRole('heading', { name: 'tiny-chat' }).waitFor();
  await sleep(1500);
  await shot(page, 'endpoint');
  // The endpoint page's Replicas tab, then its Logs tab following the replica's engine log.
  const panel = page.getByRole('region', { name: 'Replicas and logs' });
  await panel.getByRole('tab', { name: 'Replicas' }).click();
  await panel.getByRole('row').nth(1).waitFor();
  await shot(page, 'replicas');
  await panel.getByRole('tab', { name: 'Logs' }).click();
  await panel.getByRole('checkbox', { name: 'Follow' }).check();
  await panel
    .getByRole('status')
    .filter({ hasText: /^Following / })
    .first()
    .waitFor();
  await shot(page, 'logs');
  await page.goto(`${sandbox.url}/#/playground/${id}`);
  await page.getByLabel('Max tokens').fill('48');
  await page.getByLabel('Token probabilities').check();
  await page.getByLabel('Message', { exact: true }).fill('Write a short greeting.');
  await page.getByLabel('Message', { exact: true }).press('Enter');
  await page.locator('.finish-reason').first().waitFor({ timeout: 30_000 });
  await page.getByText(/^Token probabilities \(/).click();
  await shot(page, 'playground');
  await page.goto(`${sandbox.url}/#/settings`);
  await page
    .getByRole('heading', { name: /API keys/i })
    .first()
    .waitFor();
  await shot(page, 'settings');
  // The same tab (the key is kept per tab), at a phone's width.
  await page.setViewportSize({ width: 380, height: 800 });
  await page.goto(`${sandbox.url}/#/endpoints/${id}`);
  await page.getByRole('heading', { name: 'tiny-chat' }).waitFor();
  await shot(page, 'endpoint-narrow');
  await browser.close();
} finally {
  await sandbox.stop();
}
