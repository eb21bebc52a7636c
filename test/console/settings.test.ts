// API keys page: a created key's secret is shown once and works, hiding it removes it from the page, revoking it in the UI makes it fail;
// team invitations listed there, accepted and declined.
import { beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { describeBrowser, startConsole, type ConsoleHarness } from './browser.js';

// One console (its build, gateway and Chromium) for both groups: the invitations' test signs in a user of its own, so
// that it does not depend on the API keys' tests, which revoke the harness user's key.
let h: ConsoleHarness;
describeBrowser('web console: settings', () => {
  beforeAll(async () => {
    h = await startConsole();
  }, 90_000);

  describe('API keys', apiKeys);
  describe('team invitations', teamInvitations);
});

async function signIn(page: Page, key: string): Promise<void> {
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Main' }).waitFor();
}

function apiKeys() {
  const whoAmI = (key: string) =>
    fetch(`${h.app.url}/graphql`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ me { user { id } } }' }),
    });

  it('creates a key whose secret is shown once and works, then revokes it', async () => {
    const page = await h.signedIn({ width: 380, height: 800 });
    await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: h.app.url });
    await page.getByRole('link', { name: 'API keys' }).click();
    await page.getByRole('heading', { name: 'API keys', level: 1 }).waitFor();
    // The session's own key is listed.
    await page.getByRole('table').getByText('(this session)').waitFor();

    // An empty name is refused beside the field.
    await page.getByRole('button', { name: 'Create key' }).click();
    expect(await page.getByLabel('Key name').getAttribute('aria-invalid')).toBe('true');

    await page.getByLabel('Key name').fill('ci runner');
    await page.getByRole('button', { name: 'Create key' }).click();
    const secretField = page.getByLabel('New API key');
    await secretField.waitFor();
    await expect.poll(() => page.getByText('it will not be shown again').count()).toBe(1);
    const secret = await secretField.inputValue();
    expect(secret).toMatch(/^dek_/);

    // Copy: to the clipboard, or (no clipboard access) the key selected for the user to copy.
    await page.getByRole('button', { name: 'Copy' }).click();
    await expect.poll(() => page.locator('.copy-status').innerText()).toMatch(/Copied|selected/);
    if ((await page.locator('.copy-status').innerText()).includes('Copied')) {
      expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(secret);
    }

    // The secret works against the API.
    const response = await whoAmI(secret);
    expect(response.status).toBe(200);
    const body = (await response.json()) as { data?: { me: { user: { id: string } } } };
    expect(body.data?.me.user.id).toBe(h.user.user.id);

    // No horizontal page scroll at 380 px, even with the key shown.
    expect(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth)).toBe(true);

    // Hidden: gone from the page for good; the key is listed by its prefix.
    await page.getByRole('button', { name: 'Done, hide the key' }).click();
    await secretField.waitFor({ state: 'detached' });
    expect(await page.content()).not.toContain(secret);
    const row = page.locator('tr[data-key-id]').filter({ hasText: 'ci runner' });
    await row.waitFor();
    expect(await row.innerText()).toContain(secret.slice(0, 12));
    expect(await row.innerText()).toContain('Active');

    // Revoke, after an inline confirmation that Cancel backs out of.
    await page.getByRole('button', { name: 'Revoke ci runner' }).click();
    await page.getByRole('button', { name: 'Cancel' }).click();
    await page.getByRole('button', { name: 'Yes, revoke ci runner' }).waitFor({ state: 'detached' });
    expect((await whoAmI(secret)).status).toBe(200);
    await page.getByRole('button', { name: 'Revoke ci runner' }).click();
    const confirmation = page.getByRole('group', { name: /Revoke “ci runner”/ });
    expect(await confirmation.innerText()).toContain('cannot be undone');
    await page.getByRole('button', { name: 'Yes, revoke ci runner' }).click();
    // The revocation answers once no gateway accepts the key any more (about a second); the button says it is under way.
    await expect.poll(() => confirmation.innerText()).toContain('Revoking…');
    await expect.poll(() => row.innerText(), { timeout: 5000 }).toContain('Revoked');
    await expect.poll(() => page.getByRole('status').filter({ hasText: 'revoked' }).count()).toBe(1);
    expect(await page.getByRole('button', { name: 'Revoke ci runner' }).count()).toBe(0);
    expect((await whoAmI(secret)).status).toBe(401);
  });

  it('warns before revoking the key the console is signed in with, and signs out when it is', async () => {
    const page = await h.signedIn();
    await page.getByRole('link', { name: 'API keys' }).click();
    const row = page.getByRole('row', { name: /\(this session\)/ });
    const name = await row.getByRole('rowheader').innerText();
    await page.getByRole('button', { name: `Revoke ${name}` }).click();
    await page.getByText('This console is signed in with this key').waitFor();
    await page.getByRole('button', { name: `Yes, revoke ${name}` }).click();
    await page.getByLabel('API key').waitFor();
    expect((await whoAmI(h.user.key)).status).toBe(401);
  });
}

function teamInvitations() {
  const invite = async (owner: { key: string }, invitee: { email: string }, teamName: string) => {
    const call = (query: string, variables: Record<string, unknown>) =>
      fetch(`${h.app.url}/graphql`, {
        method: 'POST',
        headers: { authorization: `Bearer ${owner.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ query, variables }),
      }).then((r) => r.json() as Promise<{ data: Record<string, { team?: { id: string }; __typename: string }> }>);
    const team = (
      await call('mutation($n: String!) { createTeam(name: $n) { __typename ... on CreateTeamSuccess { team { id } } } }', { n: teamName })
    ).data.createTeam!.team!.id;
    const added = await call('mutation($t: ID!, $u: String!) { addTeamMember(teamId: $t, user: $u) { __typename } }', {
      t: team,
      u: invitee.email,
    });
    expect(added.data.addTeamMember!.__typename).toBe('InviteTeamMemberSuccess');
    return team;
  };

  it('lists invitations on the API keys page; accepting adds the team to the switcher, declining drops it', async () => {
    const owner = await h.app.seed.user();
    const invitee = await h.app.seed.user();
    const joined = await invite(owner, invitee.user, 'Research');
    await invite(owner, invitee.user, 'Marketing');
    const page = await h.newPage();
    await signIn(page, invitee.key);
    // Before accepting, the team is not in the switcher.
    expect(await page.getByLabel('Team').locator(`option[value="${joined}"]`).count()).toBe(0);
    await page.getByRole('link', { name: 'API keys' }).click();
    await page.getByRole('heading', { name: 'Team invitations' }).waitFor();
    await page.getByRole('button', { name: 'Accept the invitation to Research' }).click();
    await expect.poll(() => page.getByRole('status').first().innerText()).toContain('You joined Research as member.');
    await expect.poll(() => page.getByLabel('Team').locator(`option[value="${joined}"]`).count()).toBe(1);
    await page.getByRole('button', { name: 'Decline the invitation to Marketing' }).click();
    await page.getByRole('heading', { name: 'Team invitations' }).waitFor({ state: 'detached' });
    expect(await page.getByLabel('Team').locator('option', { hasText: 'Marketing' }).count()).toBe(0);
  });
}
