// The endpoint page's replicas, engine logs and event history, through the browser: the replica list, the Logs tab
// (last lines, Follow over the replicaLogs subscription, a replica that ends, a log that cannot be read), the
// subscription ending with the page, and another team's key seeing none of it.
import { beforeAll, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { TINY_REPO, waitForStatus } from '../support/app.js';
import { createBody } from '../support/gateway.js';
import { describeBrowser, startConsole, type ConsoleHarness } from './browser.js';

/** Polls a condition the page reaches on its own (a subscription's message, a re-read list): 15 s, as a loaded machine may need. */
const poll = <T>(probe: () => T | Promise<T>) => expect.poll(probe, { timeout: 15_000, interval: 100 });

async function signIn(page: Page, key: string): Promise<void> {
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Main' }).waitFor();
}

interface ReplicaRow {
  id: string;
  node: string;
}

describeBrowser('web console: replicas, logs and event history', () => {
  let h: ConsoleHarness;
  let id: string;
  let replica: ReplicaRow;
  let instanceLabel: string;

  beforeAll(async () => {
    h = await startConsole();
    const response = await h.user.rest(
      'POST',
      '/dedicated/beta/endpoint',
      createBody(h.project.id, { name: 'logs-demo', hfModelRepo: TINY_REPO, autoscalingPolicy: { minReplica: 1, maxReplica: 1 } }),
    );
    expect(response.status).toBe(200);
    id = response.body.endpointId as string;
    await waitForStatus(h.app.sql, id, 'RUNNING', 90_000);
    const replicas = await h.user.rest('GET', `/dedicated/beta/endpoint/${id}/replicas`);
    const ready = (replicas.body.data as Array<{ replicaId: string; state: string; node: string }>).find((r) => r.state === 'READY');
    expect(ready).toBeDefined();
    replica = { id: ready!.replicaId, node: ready!.node };
    const spec = await h.user.graphql.request<{
      endpoint: { spec: { instanceOption: { numGpu: number; gpuType: string; gpuMemoryGb: number } } };
    }>('query($id: ID!) { endpoint(id: $id) { spec { instanceOption { numGpu gpuType gpuMemoryGb } } } }', { id });
    const option = spec.endpoint.spec.instanceOption;
    instanceLabel = `${option.numGpu} × ${option.gpuType} (${option.gpuMemoryGb} GB)`;
  }, 120_000);

  const panel = (page: Page) => page.getByRole('region', { name: 'Replicas and logs' });
  const logView = (page: Page, replicaId: string) => page.getByRole('log', { name: `Engine log of ${replicaId}` });
  const followSwitch = (page: Page) => panel(page).getByRole('checkbox', { name: 'Follow' });

  async function openTab(page: Page, endpointId: string, tab: 'Replicas' | 'Logs' | 'Event history') {
    await page.goto(`${h.app.url}/#/endpoints/${endpointId}`);
    await panel(page).getByRole('tab', { name: tab }).click();
    await poll(() => panel(page).getByRole('tab', { name: tab }).getAttribute('aria-selected')).toBe('true');
  }

  it('lists the running replica: its state, version, instance label, node and since when; no failures', async () => {
    const page = await h.signedIn();
    await openTab(page, id, 'Replicas');
    const row = panel(page).locator(`tr[data-replica="${replica.id}"]`);
    await row.waitFor();
    const cells = async () =>
      Object.fromEntries(
        await row
          .locator('td[data-label]')
          .evaluateAll((tds) => tds.map((td) => [td.getAttribute('data-label'), (td as HTMLElement).innerText.trim()])),
      );
    await expect
      .poll(cells)
      .toMatchObject({ Replica: replica.id, State: 'READY', Version: '0', Instance: instanceLabel, 'Last error': '—' });
    const shown = await cells();
    expect(shown.Where).toBe(`${replica.node} (local)`);
    expect(Number.isNaN(Date.parse((await row.locator('time').getAttribute('datetime')) ?? ''))).toBe(false);
    await poll(() => panel(page).getByTestId('replica-failures').innerText()).toMatch(/Failed in the last 10 min: 0/);
    // The row's Log button opens the Logs tab on that replica.
    await row.getByRole('button', { name: `Log of ${replica.id}` }).click();
    await expect.poll(() => logView(page, replica.id).innerText(), { timeout: 20_000 }).toMatch(/^ENGINE_READY /m);
  }, 60_000);

  it('says so when an endpoint has no replica yet; shows a failed replica with why, and the event history', async () => {
    // Eight GPUs of a kind: more than this gateway offers (CPU_SLOTS=4), so it waits for capacity without a replica.
    const waiting = await h.user.rest(
      'POST',
      '/dedicated/beta/endpoint',
      createBody(h.project.id, { name: 'waiting', hfModelRepo: TINY_REPO, instanceOptionId: 'drbc6G9FxJWZ' }),
    );
    expect(waiting.status, JSON.stringify(waiting.body)).toBe(200);
    const page = await h.signedIn();
    await openTab(page, waiting.body.endpointId as string, 'Replicas');
    await poll(() => panel(page).innerText()).toContain('No replicas yet');
    await panel(page).getByRole('tab', { name: 'Logs' }).click();
    await poll(() => panel(page).innerText()).toContain('No replicas yet, so no engine log');
    expect(await page.getByRole('log').count()).toBe(0);

    // A model without weights: its replica fails, and the list says why; the event history has its creation and failure.
    const response = await h.user.rest('POST', '/dedicated/beta/endpoint', {
      projectId: h.project.id,
      name: 'no-weights',
      instanceOptionId: 'TwD5AqnBSVN0',
      hfModelRepo: 'test-org/no-weights',
      advanced: {},
    });
    expect(response.status).toBe(200);
    const failing = response.body.endpointId as string;
    await waitForStatus(h.app.sql, failing, 'FAILED', 60_000);
    await openTab(page, failing, 'Replicas');
    const failed = panel(page).locator('tr[data-replica]').first();
    await poll(() => failed.locator('td[data-label="State"]').innerText()).toBe('FAILED');
    await poll(() => failed.locator('td[data-label="Last error"]').innerText()).toContain('contains no model files');
    await expect
      .poll(() => panel(page).getByTestId('replica-failures').innerText())
      .toMatch(/Failed in the last 10 min: [1-9].*last: rep_\w+ at .*contains no model files/);
    await panel(page).getByRole('tab', { name: 'Event history' }).click();
    const history = panel(page).getByRole('list', { name: 'Event history' });
    await poll(() => history.innerText()).toContain('Created');
    await poll(() => history.innerText()).toMatch(/WORKLOAD_INIT_\w+/);
  }, 90_000);

  it('follows the log live: a line the engine writes after Follow opened appears, and the ended replica says so', async () => {
    const page = await h.signedIn();
    await openTab(page, id, 'Logs');
    const log = logView(page, replica.id);
    // The last lines: the runtime's spawn line and the engine's start line, without its port or process id.
    await expect.poll(() => log.innerText(), { timeout: 20_000 }).toMatch(/^ENGINE_READY \{/m);
    expect(await log.innerText()).toMatch(/^\[runtime\] spawning the engine /m);
    expect(await log.innerText()).not.toMatch(/"(port|pid)"/);
    expect(await log.innerText()).not.toContain('draining');

    await followSwitch(page).check();
    await poll(() => panel(page).getByRole('status').first().innerText()).toContain(`Following ${replica.id}`);
    // The follow starts with the last lines...
    await expect.poll(() => log.innerText(), { timeout: 20_000 }).toMatch(/^ENGINE_READY \{/m);
    // ...then what the engine writes from now on: sleeping the endpoint stops its engine, which logs that it drains.
    await page.getByRole('group', { name: 'Lifecycle actions' }).getByRole('button', { name: 'Sleep', exact: true }).click();
    await expect.poll(() => log.innerText(), { timeout: 60_000, interval: 250 }).toMatch(/^\[engine\] SIGTERM: draining/m);
    expect(await followSwitch(page).isChecked()).toBe(true);
    // The replica stopped: the tab says so (the list is read again on the endpoint's events).
    const ended = panel(page).locator('.replica-ended');
    await expect
      .poll(() => ended.innerText(), { timeout: 30_000, interval: 250 })
      .toMatch(new RegExp(`Replica ${replica.id} is stopped .*its log will not grow`));

    // Waking starts a new replica; the tab offers it, and shows its own log.
    await page.getByRole('group', { name: 'Lifecycle actions' }).getByRole('button', { name: 'Wake', exact: true }).click();
    const next = ended.getByRole('button', { name: /^Show rep_/ });
    await next.waitFor({ timeout: 60_000 });
    const nextId = /^Show (rep_\w+)/.exec(await next.innerText())![1]!;
    expect(nextId).not.toBe(replica.id);
    await next.click();
    await expect.poll(() => logView(page, nextId).innerText(), { timeout: 60_000, interval: 250 }).toMatch(/^ENGINE_READY \{/m);
    await waitForStatus(h.app.sql, id, 'RUNNING', 60_000);
    replica = { ...replica, id: nextId };
  }, 180_000);

  it('ends the log subscription when Follow is switched off and when the page is left', async () => {
    // Every frame of every socket the page opens, from before it signs in.
    const page = await h.newPage();
    const sent: Array<{ id?: string; type?: string; payload?: { query?: string } }> = [];
    page.on('websocket', (ws) => ws.on('framesent', ({ payload }) => sent.push(JSON.parse(String(payload)))));
    await signIn(page, h.user.key);
    // The replicaLogs subscriptions the page started and has not ended (a `complete` from the client ends one).
    const openLogSubscriptions = () => {
      const ended = new Set(sent.filter((m) => m.type === 'complete').map((m) => m.id));
      return sent.filter((m) => m.type === 'subscribe' && m.payload?.query?.includes('replicaLogs') && !ended.has(m.id)).map((m) => m.id!);
    };
    const everStarted = () => sent.filter((m) => m.type === 'subscribe' && m.payload?.query?.includes('replicaLogs')).length;

    await openTab(page, id, 'Logs');
    await logView(page, replica.id).waitFor();
    expect(everStarted()).toBe(0);
    await followSwitch(page).check();
    await poll(openLogSubscriptions).toHaveLength(1);
    const [first] = openLogSubscriptions();
    await followSwitch(page).uncheck();
    await poll(openLogSubscriptions).toEqual([]);

    await followSwitch(page).check();
    await poll(openLogSubscriptions).toHaveLength(1);
    const [second] = openLogSubscriptions();
    expect(second).not.toBe(first);
    await poll(() => logView(page, replica.id).innerText()).toMatch(/ENGINE_READY/);
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Endpoints' }).click();
    await poll(() => new URL(page.url()).hash).toBe('#/');
    await poll(openLogSubscriptions).toEqual([]);
  }, 60_000);

  it("shows the server's reason when a replica's log cannot be read here", async () => {
    // A replica that ran on another gateway machine keeps its log there: this gateway cannot read it.
    const other = `rep_elsewhere${Date.now().toString(36)}`;
    await h.app.sql`
      INSERT INTO replicas (id, endpoint_id, version_index, runtime, node, gpu_type, num_gpu, state, last_error, created_at, ready_at, stopped_at)
      VALUES (${other}, ${id}, 0, 'local', 'gpu-elsewhere', 'H100', 1, 'STOPPED', 'stopped by the controller',
              now() - interval '2 minutes', now() - interval '2 minutes', now() - interval '1 minute')`;
    const page = await h.signedIn();
    await openTab(page, id, 'Logs');
    await panel(page).getByLabel('Replica', { exact: true }).selectOption(other);
    const alert = panel(page).getByRole('alert');
    await poll(() => alert.innerText()).toBe('The log cannot be shown: the replica ran on gpu-elsewhere: its log is kept there');
    await followSwitch(page).check();
    await poll(() => alert.innerText()).toBe('The log cannot be followed: the replica ran on gpu-elsewhere: its log is kept there');
    expect(await page.getByRole('log').count()).toBe(0);
  }, 60_000);

  it('fits 380 px without horizontal scrolling, the replica table and the log included', async () => {
    const page = await h.signedIn({ width: 380, height: 800 });
    await openTab(page, id, 'Replicas');
    await panel(page).locator(`tr[data-replica="${replica.id}"]`).waitFor();
    const overflow = () => page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    expect(await overflow()).toBeLessThanOrEqual(0);
    await panel(page).getByRole('tab', { name: 'Logs' }).click();
    await expect.poll(() => logView(page, replica.id).innerText(), { timeout: 20_000 }).toMatch(/ENGINE_READY/);
    expect(await overflow()).toBeLessThanOrEqual(0);
  }, 60_000);

  it("shows another team's key neither the replicas nor the logs", async () => {
    const outsider = await h.app.seed.user();
    const page = await h.newPage();
    await signIn(page, outsider.key);
    await page.goto(`${h.app.url}/#/endpoints/${id}`);
    await page.getByRole('heading', { level: 1, name: 'Endpoint not found' }).waitFor();
    const text = await page.locator('main').innerText();
    expect(text).not.toContain(replica.id);
    expect(text).not.toContain('ENGINE_READY');
    expect(await page.getByRole('region', { name: 'Replicas and logs' }).count()).toBe(0);
    // The API the console talks to refuses the same, with the outsider's key from the page.
    const answer = await page.evaluate(
      async ({ endpointId, key }) => {
        const response = await fetch('/graphql', {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
          body: JSON.stringify({
            query: 'query($id: ID!) { endpoint(id: $id) { replicas { nodes { id } } logs { lines } } }',
            variables: { id: endpointId },
          }),
        });
        return (await response.json()) as { data: { endpoint: unknown } };
      },
      { endpointId: id, key: outsider.key },
    );
    expect(answer.data).toEqual({ endpoint: null });
    // While the owner's key sees them.
    const owner = await h.signedIn();
    await openTab(owner, id, 'Replicas');
    await owner.locator(`tr[data-replica="${replica.id}"]`).waitFor();
  }, 60_000);
});
