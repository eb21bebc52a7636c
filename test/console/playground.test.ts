// Chat playground: the answer streams token by token through the chatCompletion subscription, its finish reason shows, the
// completion is announced once; a reasoning model's think block shows apart from the answer, and not at all with reasoning off.
import { beforeAll, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { TINY_LONG_REPO, waitFor, waitForStatus } from '../support/app.js';
import { createBody } from '../support/gateway.js';
import { describeBrowser, startConsole, type ConsoleHarness } from './browser.js';

describeBrowser('web console: playground', () => {
  let h: ConsoleHarness;
  let chat: string;
  let thinking: string;

  const createEndpoint = async (name: string, hfModelRepo: string, maxTokenCount: number) => {
    const response = await h.user.rest(
      'POST',
      '/dedicated/beta/endpoint',
      createBody(h.project.id, {
        name,
        hfModelRepo,
        autoscalingPolicy: { minReplica: 1, maxReplica: 1 },
        advanced: { max_batch_size: 2, max_token_count: maxTokenCount, max_input_length: 256 },
      }),
    );
    expect(response.status).toBe(200);
    return response.body.endpointId as string;
  };

  beforeAll(async () => {
    h = await startConsole();
    [chat, thinking] = await Promise.all([
      // A 64k context, so that an answer can run long enough to be stopped however busy the machine is.
      createEndpoint('tiny-chat', TINY_LONG_REPO, 65_536),
      createEndpoint('tiny-thinking', 'test-org/tiny-thinking-GGUF', 1024),
    ]);
    await Promise.all([waitForStatus(h.app.sql, chat, 'RUNNING', 90_000), waitForStatus(h.app.sql, thinking, 'RUNNING', 90_000)]);
  }, 180_000);

  /** Records, at every change of the page, the newest answer's text and reasoning lengths and the live announcement. */
  const observe = (page: Page) =>
    page.evaluate(() => {
      const w = window as unknown as { observations: { answer: number; reasoning: number; announced: string }[] };
      w.observations = [];
      const observer = new MutationObserver(() => {
        const answers = document.querySelectorAll('.message-assistant');
        const last = answers[answers.length - 1];
        w.observations.push({
          answer: last?.querySelector('.answer')?.textContent?.length ?? 0,
          reasoning: last?.querySelector('.reasoning-text')?.textContent?.length ?? 0,
          announced: document.querySelector('[data-testid="playground-announcement"]')?.textContent ?? '',
        });
      });
      observer.observe(document.body, { subtree: true, childList: true, characterData: true });
    });
  const observations = (page: Page) =>
    page.evaluate(() => (window as unknown as { observations: { answer: number; reasoning: number; announced: string }[] }).observations);

  const announcement = (page: Page) => page.getByTestId('playground-announcement');

  /**
   * Counts the chatCompletion messages the page's WebSockets receive: the transport's proof of streaming (on a loaded
   * machine the browser may take several chunks in one task and render them at once). Installed before the page's own
   * scripts, through a reload (the key stays in the tab's session storage).
   */
  const countChunkMessages = async (page: Page) => {
    await page.context().addInitScript(() => {
      const w = window as unknown as { chunkMessages: number };
      w.chunkMessages = 0;
      const Native = window.WebSocket;
      window.WebSocket = class extends Native {
        constructor(url: string | URL, protocols?: string | string[]) {
          super(url, protocols);
          this.addEventListener('message', (event) => {
            if (typeof event.data === 'string' && event.data.includes('"chatCompletion"')) w.chunkMessages++;
          });
        }
      };
    });
    await page.reload();
  };
  const chunkMessages = (page: Page) => page.evaluate(() => (window as unknown as { chunkMessages: number }).chunkMessages);

  const setMaxTokens = (page: Page, n: number) => page.getByLabel('Max tokens').fill(String(n));

  it('streams the answer token by token, shows the finish reason and usage, and announces the completion once', async () => {
    const page = await h.signedIn();
    await page.goto(`${h.app.url}/#/playground/${chat}`);
    await countChunkMessages(page);
    const picker = page.getByLabel('Endpoint', { exact: true });
    await expect.poll(() => picker.inputValue()).toBe(chat);
    await page.locator('.endpoint-status [data-status="RUNNING"]').waitFor();
    await setMaxTokens(page, 24);
    await page.getByLabel('Temperature').fill('0');
    await observe(page);

    const message = page.getByLabel('Message', { exact: true });
    await message.fill('Tell me a story.');
    await message.press('Enter');
    await expect.poll(() => announcement(page).innerText(), { timeout: 30_000 }).toContain('Answer complete');
    expect(await announcement(page).innerText()).toContain('finish reason: length');

    // It streamed: the chunks came as separate subscription messages (24 tokens, at least one message per few tokens),
    // and the page rendered the answer as they came.
    expect(await chunkMessages(page)).toBeGreaterThanOrEqual(2);
    const seen = await observations(page);
    // Announced once, at the end: never each token.
    const announcements = new Set(seen.map((o) => o.announced).filter(Boolean));
    expect([...announcements]).toEqual([await announcement(page).innerText()]);

    const answer = page.locator('.message-assistant').last();
    expect((await answer.locator('.answer').innerText()).length).toBeGreaterThan(0);
    expect(await answer.locator('.finish-reason').innerText()).toBe('Finish reason: length');
    expect(await answer.innerText()).toMatch(/24 completion/);
    expect(await answer.locator('.reasoning').count()).toBe(0);
    // The user's message and the emptied box; Shift+Enter adds a line rather than sending.
    expect(await page.locator('.message-user').innerText()).toContain('Tell me a story.');
    expect(await message.inputValue()).toBe('');
    await message.type('one');
    await message.press('Shift+Enter');
    await message.type('two');
    expect(await message.inputValue()).toBe('one\ntwo');
    expect(await page.locator('.message-user').count()).toBe(1);

    // Clear empties the conversation.
    await page.getByRole('button', { name: 'Clear' }).click();
    expect(await page.locator('.message').count()).toBe(0);
  });

  it('Stop ends the answer while it streams, and the generation with it', async () => {
    const page = await h.signedIn();
    await page.goto(`${h.app.url}/#/playground/${chat}`);
    await expect.poll(() => page.getByLabel('Endpoint', { exact: true }).inputValue()).toBe(chat);
    await setMaxTokens(page, 60_000);
    // Greedy: sampled, the random model picks its end-of-text token now and then (an answer over before Stop, about one
    // in six); greedy, this prompt's answer runs to the token limit, the same every run.
    await page.getByLabel('Temperature', { exact: true }).fill('0');
    // An engine that ended the answer a moment before the press reached the gateway leaves its log row not cancelled:
    // then it asks again, in a fresh conversation.
    for (let attempt = 1; ; attempt++) {
      const since = new Date();
      await page.getByLabel('Message', { exact: true }).fill('Tell me a long story.');
      await page.getByRole('button', { name: 'Send' }).click();
      await expect.poll(() => page.locator('.message-assistant .answer').innerText()).not.toBe('');
      // With the keyboard (a click would wait for the button to stop moving while the answer grows).
      const pressed = await page
        .getByRole('button', { name: 'Stop' })
        .press('Enter', { timeout: 2_000 })
        .then(
          () => true,
          () => false,
        );
      if (pressed) await expect.poll(() => announcement(page).innerText()).toMatch(/^Stopped\.$|Answer complete/);
      if (pressed && (await announcement(page).innerText()) === 'Stopped.') {
        const row = await waitFor(
          "the request's log row",
          async () =>
            (await h.app.sql`SELECT cancelled FROM request_log WHERE endpoint_id = ${chat} AND started_at >= ${since} LIMIT 1`)[0],
          10_000,
        );
        if (row.cancelled) break;
      }
      expect(attempt, 'the answer ended before Stop, three times').toBeLessThan(3);
      await page.getByRole('button', { name: 'Clear' }).click();
    }
    expect(await page.getByRole('button', { name: 'Stop' }).count()).toBe(0);
    expect(await page.locator('.message-assistant').innerText()).toContain('Stopped');
    // Focus went back to the message box (and the gateway logged the request as cancelled: the loop's condition).
    expect(await page.evaluate(() => document.activeElement?.tagName)).toBe('TEXTAREA');
  });

  it("shows a reasoning model's reasoning apart from the answer, and none with reasoning off", async () => {
    const page = await h.signedIn({ width: 380, height: 800 });
    await countChunkMessages(page);
    await page.getByRole('link', { name: 'Playground' }).click();
    await page.getByLabel('Endpoint', { exact: true }).selectOption(thinking);
    await page.waitForURL(`**/#/playground/${thinking}`);
    await setMaxTokens(page, 16);
    // Greedy, so that the random model's answer is the same every run (sampled, it closes its think block now and then).
    await page.getByLabel('Temperature', { exact: true }).fill('0');
    await observe(page);
    const message = page.getByLabel('Message', { exact: true });
    await message.fill('Why is the sky blue?');
    await page.getByRole('button', { name: 'Send' }).click();
    await expect.poll(() => announcement(page).innerText(), { timeout: 30_000 }).toContain('Answer complete');

    const first = page.locator('.message-assistant').first();
    const reasoning = first.locator('details.reasoning');
    expect(await reasoning.locator('summary').innerText()).toBe('Reasoning');
    expect((await reasoning.locator('.reasoning-text').innerText()).length).toBeGreaterThan(0);
    // The reasoning streamed too (separate subscription messages), and the answer text holds none of it (this template,
    // greedy, thinks for all 16 tokens).
    expect(await chunkMessages(page)).toBeGreaterThanOrEqual(2);
    expect(await first.locator('.answer').count()).toBe(0);
    // Collapsible with the keyboard.
    await reasoning.locator('summary').focus();
    await page.keyboard.press('Enter');
    expect(await reasoning.evaluate((d) => (d as HTMLDetailsElement).open)).toBe(false);

    await page.getByLabel('Reasoning').uncheck();
    await message.fill('And without thinking?');
    await message.press('Enter');
    await expect.poll(() => page.locator('.message-assistant').count()).toBe(2);
    await expect.poll(() => announcement(page).innerText(), { timeout: 30_000 }).toContain('Answer complete');
    const second = page.locator('.message-assistant').last();
    expect(await second.locator('.reasoning').count()).toBe(0);
    expect((await second.locator('.answer').innerText()).length).toBeGreaterThan(0);
    // No horizontal page scroll at 380 px.
    expect(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth)).toBe(true);
  });

  it('JSON output: the answer is JSON from its first character, and a finished one parses', async () => {
    const page = await h.signedIn();
    await page.goto(`${h.app.url}/#/playground/${chat}`);
    await page.locator('.endpoint-status [data-status="RUNNING"]').waitFor();
    await setMaxTokens(page, 40);
    await page.getByLabel('JSON output').check();
    const message = page.getByLabel('Message', { exact: true });
    await message.fill('Describe a cat as JSON.');
    await message.press('Enter');
    await expect.poll(() => announcement(page).innerText(), { timeout: 30_000 }).toContain('Answer complete');
    const answer = page.locator('.message-assistant').last();
    const text = await answer.locator('.answer').innerText();
    expect(text.trimStart().startsWith('{')).toBe(true);
    if ((await answer.locator('.finish-reason').innerText()).endsWith('stop')) expect(typeof JSON.parse(text)).toBe('object');
  });

  it('token probabilities: the answer is shaded token by token, and the table lists each token with its alternatives; more sampling settings are checked', async () => {
    const page = await h.signedIn();
    await page.goto(`${h.app.url}/#/playground/${chat}`);
    await page.locator('.endpoint-status [data-status="RUNNING"]').waitFor();
    await setMaxTokens(page, 6);
    await page.getByLabel('Temperature').fill('0');
    await page.getByLabel('Token probabilities').check();
    // A setting out of its range blocks sending, with its rule in place of its hint.
    await page.getByText('More sampling').click();
    await page.getByLabel('Frequency penalty').fill('3');
    await expect.poll(() => page.getByText('A number from -2 to 2.').count()).toBe(1);
    await page.getByLabel('Frequency penalty').fill('0.5');
    await page.getByLabel('Top K').fill('5');
    const message = page.getByLabel('Message', { exact: true });
    await message.fill('Hello');
    await message.press('Enter');
    await expect.poll(() => announcement(page).innerText(), { timeout: 30_000 }).toContain('Answer complete');
    const answer = page.locator('.message-assistant').last();
    const spans = answer.locator('.answer .token');
    expect(await spans.count()).toBe(6);
    expect((await spans.allTextContents()).join('')).toBe(await answer.locator('.answer').textContent());
    expect(await spans.first().getAttribute('title')).toMatch(/^[\d.e+-]+% · likeliest: ".*" [\d.e+-]+%/);
    await answer.getByText('Token probabilities (6 tokens)').click();
    const rows = answer.locator('.token-table tbody tr');
    expect(await rows.count()).toBe(6);
    // Greedy: each token is its position's likeliest, listed first among 5 alternatives.
    const first = await rows.first().locator('td').allInnerTexts();
    expect(first[3]!.split('%, ')).toHaveLength(5);
    expect(first[3]!.startsWith(`${first[1]} ${first[2]}`)).toBe(true);
  });

  it('shows why a request fails, readably', async () => {
    const page = await h.signedIn();
    await page.goto(`${h.app.url}/#/playground/${chat}`);
    await expect.poll(() => page.getByLabel('Endpoint', { exact: true }).inputValue()).toBe(chat);
    // A max tokens the gateway refuses: its own message, in an alert.
    await page.getByLabel('Max tokens').fill('100000');
    await page.getByLabel('Message', { exact: true }).fill('Hello');
    await page.getByRole('button', { name: 'Send' }).click();
    await expect.poll(() => announcement(page).innerText()).toBe('The answer failed.');
    const alert = page.locator('.message-assistant [role="alert"]');
    expect(await alert.innerText()).toContain('maxTokens asks for 100000');
    // Retry sends the question again, in place of the failed answer.
    await page.getByLabel('Max tokens').fill('4');
    await page.getByRole('button', { name: 'Retry' }).click();
    await expect.poll(() => announcement(page).innerText(), { timeout: 30_000 }).toContain('Answer complete');
    expect(await page.locator('.message-user').count()).toBe(1);
    expect(await page.locator('.message-assistant [role="alert"]').count()).toBe(0);

    // An endpoint that serves no requests: its status shows live, and sending says why it fails.
    const terminated = await h.user.graphql.request<{ terminateEndpoint: { __typename: string } }>(
      'mutation($id: ID!) { terminateEndpoint(id: $id) { __typename } }',
      { id: thinking },
    );
    expect(terminated.terminateEndpoint.__typename).toBe('TerminateEndpointSuccess');
    await page.getByLabel('Endpoint', { exact: true }).selectOption(thinking);
    await page.locator('.endpoint-status [data-status="TERMINATED"]').waitFor({ timeout: 30_000 });
    await page.getByText('does not serve requests now').waitFor();
    await page.getByLabel('Message', { exact: true }).fill('Anyone there?');
    await page.getByLabel('Message', { exact: true }).press('Enter');
    await expect.poll(() => announcement(page).innerText()).toBe('The answer failed.');
    const failure = page.locator('.message-assistant [role="alert"]').last();
    expect(await failure.innerText()).toMatch(/TERMINATED.*serves no requests/);
    expect(await failure.getByRole('link', { name: "Open the endpoint's page" }).getAttribute('href')).toBe(`#/endpoints/${thinking}`);
    // The picker's option follows the live status too.
    expect(await page.locator(`option[value="${thinking}"]`).innerText()).toContain('TERMINATED');
  });

  it('a key revoked while no socket was open signs the console out at its next subscription (4401), without retrying', async () => {
    const identity = h.app.app.services.identity;
    const key = await identity.createApiKey('system', { name: 'short-lived', user: h.user.user.id });
    if (key.type === 'error') throw new Error(key.error.message);
    const page = await h.newPage();
    await page.getByLabel('API key').fill(key.value.secret);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('navigation', { name: 'Main' }).waitFor();
    // The playground with no endpoint picked opens no socket.
    await page.goto(`${h.app.url}/#/playground`);
    await page.getByLabel('Endpoint', { exact: true }).waitFor();
    await identity.revokeApiKey('system', key.value.record.id);
    // Picking an endpoint subscribes to its status over a new socket, which the gateway closes with 4401.
    await page.getByLabel('Endpoint', { exact: true }).selectOption(chat);
    await page.getByLabel('API key').waitFor();
    expect(await page.getByText('no longer works').count()).toBeGreaterThan(0);
  });
});
