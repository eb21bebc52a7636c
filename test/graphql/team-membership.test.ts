/**
 * Team membership and its rules, through the typed SDK over a real socket: a
 * team owner's addTeamMember is an invitation that grants nothing (no team,
 * no models, no team header, no name resolution) until the invitee accepts
 * it; it answers the same whether or not the email or id belongs to anyone,
 * and shows the owner only what they typed. A team keeps an owner, even
 * against two owners demoting each other at once. createApiKey accepts the
 * caller's own email, and emails are unique and found whatever their case.
 */
import { beforeAll, describe, expect, test } from 'vitest';
import {
  AcceptTeamInvitationDocument,
  AddTeamMemberDocument,
  CreateApiKeyDocument,
  CreateTeamDocument,
  CreateUserDocument,
  DeclineTeamInvitationDocument,
  MeDocument,
  MyTeamInvitationsDocument,
  RemoveTeamMemberDocument,
  TeamDocument,
  TeamInvitationsDocument,
  TeamsDocument,
  createClient,
  type AddTeamMemberMutation,
} from '../../src/sdk/client.js';
import { startTestGateway, type SeededUser, type TestGateway } from '../support/gateway.js';

let t: TestGateway;
let admin: SeededUser;

beforeAll(async () => {
  t = await startTestGateway();
  admin = await t.seed.user({ admin: true });
});

type Invitation = Extract<AddTeamMemberMutation['addTeamMember'], { __typename: 'InviteTeamMemberSuccess' }>['invitation'];

async function invite(owner: SeededUser, teamId: string, user: string, role?: 'OWNER' | 'MEMBER'): Promise<Invitation> {
  const { addTeamMember } = await owner.graphql.request(AddTeamMemberDocument, { teamId, user, role });
  if (addTeamMember.__typename !== 'InviteTeamMemberSuccess') throw new Error(`expected an invitation, got ${addTeamMember.__typename}`);
  return addTeamMember.invitation;
}

async function accept(user: SeededUser, id: string): Promise<void> {
  const { acceptTeamInvitation } = await user.graphql.request(AcceptTeamInvitationDocument, { id });
  expect(acceptTeamInvitation.__typename).toBe('AcceptTeamInvitationSuccess');
}

async function myInvitations(user: SeededUser) {
  return (await user.graphql.request(MyTeamInvitationsDocument)).me.invitations;
}

async function newTeam(owner: SeededUser, name: string): Promise<string> {
  const { createTeam } = await owner.graphql.request(CreateTeamDocument, { name });
  if (createTeam.__typename !== 'CreateTeamSuccess') throw new Error(createTeam.__typename);
  return createTeam.team.id;
}

function chat(user: SeededUser, model: string) {
  return fetch(`${t.url}/dedicated/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${user.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'Hi' }] }),
  });
}

async function modelIds(user: SeededUser): Promise<string[]> {
  const response = await user.rest('GET', '/dedicated/v1/models');
  expect(response.status).toBe(200);
  return (response.body.data as { id: string }[]).map((m) => m.id);
}

describe('an invitation grants nothing until it is accepted', () => {
  test("a team owner's addTeamMember invites; the invitee sees no team, model or name until they accept", async () => {
    const mallory = await t.seed.user();
    const bob = await t.seed.user();
    const malloryProject = await mallory.project('lure');
    const lure = await malloryProject.endpoint({ name: 'mallory-only' });
    const twin = await malloryProject.endpoint({ name: 'shared-name' });
    const bobs = await (await bob.project('own')).endpoint({ name: 'shared-name' });

    const invitation = await invite(mallory, mallory.teamId, bob.user.id);
    // The owner sees what they typed (the id), not who it is.
    expect(invitation).toEqual({
      id: expect.stringMatching(/^inv_/),
      teamId: mallory.teamId,
      teamName: expect.any(String),
      invitee: bob.user.id,
      role: 'MEMBER',
      invitedBy: mallory.user.name,
      createdAt: expect.any(String),
      expiresAt: expect.any(String),
    });
    const seenByOwner = await mallory.graphql.request(TeamInvitationsDocument, { id: mallory.teamId });
    expect(seenByOwner.team?.invitations).toEqual([invitation]);
    const { teams: malloryTeams } = await mallory.graphql.request(TeamsDocument);
    const members = malloryTeams.find((team) => team.id === mallory.teamId)!.members;
    expect(members.map((m) => m.user.id)).toEqual([mallory.user.id]);
    expect(JSON.stringify([seenByOwner, malloryTeams])).not.toContain(bob.user.email);

    // Bob, before he accepts: not in the team anywhere.
    expect((await myInvitations(bob)).map((i) => i.id)).toEqual([invitation.id]);
    expect((await bob.graphql.request(TeamsDocument)).teams.map((team) => team.id)).toEqual([bob.teamId]);
    expect((await bob.graphql.request(TeamDocument, { id: mallory.teamId })).team).toBeNull();
    const asTeam = await bob.rest('GET', '/dedicated/beta/endpoint', undefined, { 'x-friendli-team': mallory.teamId });
    expect(asTeam.status).toBe(403);
    expect(await modelIds(bob)).toEqual([bobs]);
    const unknown = await chat(bob, 'mallory-only');
    expect(unknown.status).toBe(404);
    expect((await unknown.json()).error.code).toBe('model_not_found');
    expect((await chat(bob, lure)).status).toBe(404);

    // Accepted: a member, with the team's models, its header, and a name shared across his teams now ambiguous.
    await accept(bob, invitation.id);
    expect(await myInvitations(bob)).toEqual([]);
    expect((await bob.graphql.request(TeamsDocument)).teams.map((team) => team.id).sort()).toEqual([bob.teamId, mallory.teamId].sort());
    expect((await bob.rest('GET', '/dedicated/beta/endpoint', undefined, { 'x-friendli-team': mallory.teamId })).status).toBe(200);
    expect((await modelIds(bob)).sort()).toEqual([bobs, lure, twin].sort());
    const ambiguous = await chat(bob, 'shared-name');
    expect(ambiguous.status).toBe(400);
    expect((await ambiguous.json()).error.code).toBe('model_ambiguous');
    expect((await mallory.graphql.request(TeamInvitationsDocument, { id: mallory.teamId })).team?.invitations).toEqual([]);

    // An invitation is accepted once.
    const again = await bob.graphql.request(AcceptTeamInvitationDocument, { id: invitation.id });
    expect(again.acceptTeamInvitation.__typename).toBe('NotFoundError');
  });

  test('only the invitee accepts; a member who is not an owner sees no invitations', async () => {
    const owner = await t.seed.user();
    const invitee = await t.seed.user();
    const other = await t.seed.user();
    const member = await t.seed.user();
    await accept(member, (await invite(owner, owner.teamId, member.user.email)).id);
    const invitation = await invite(owner, owner.teamId, invitee.user.email);

    const stolen = await other.graphql.request(AcceptTeamInvitationDocument, { id: invitation.id });
    expect(stolen.acceptTeamInvitation.__typename).toBe('NotFoundError');
    expect(await myInvitations(other)).toEqual([]);
    expect((await member.graphql.request(TeamInvitationsDocument, { id: owner.teamId })).team?.invitations).toEqual([]);
    // A member who is not an owner invites nobody.
    const byMember = await member.graphql.request(AddTeamMemberDocument, { teamId: owner.teamId, user: other.user.email });
    expect(byMember.addTeamMember.__typename).toBe('ForbiddenError');
    await accept(invitee, invitation.id);
  });

  test('the invitee declines; the owner withdraws; a stranger can do neither', async () => {
    const owner = await t.seed.user();
    const bob = await t.seed.user();
    const carol = await t.seed.user();
    const stranger = await t.seed.user();

    // Typed in another case: the invitation names the email as stored, and reaches Bob.
    const toBob = await invite(owner, owner.teamId, bob.user.email.toUpperCase());
    expect(toBob.invitee).toBe(bob.user.email);
    expect((await myInvitations(bob)).map((i) => i.id)).toEqual([toBob.id]);
    const refused = await stranger.graphql.request(DeclineTeamInvitationDocument, { id: toBob.id });
    expect(refused.declineTeamInvitation.__typename).toBe('NotFoundError');
    const declined = await bob.graphql.request(DeclineTeamInvitationDocument, { id: toBob.id });
    expect(declined.declineTeamInvitation).toEqual({ __typename: 'DeclineTeamInvitationSuccess', invitationId: toBob.id });
    expect(await myInvitations(bob)).toEqual([]);
    expect((await bob.graphql.request(AcceptTeamInvitationDocument, { id: toBob.id })).acceptTeamInvitation.__typename).toBe(
      'NotFoundError',
    );
    expect((await bob.graphql.request(TeamDocument, { id: owner.teamId })).team).toBeNull();

    const toCarol = await invite(owner, owner.teamId, carol.user.id);
    const withdrawn = await owner.graphql.request(DeclineTeamInvitationDocument, { id: toCarol.id });
    expect(withdrawn.declineTeamInvitation.__typename).toBe('DeclineTeamInvitationSuccess');
    expect(await myInvitations(carol)).toEqual([]);
    expect((await owner.graphql.request(TeamInvitationsDocument, { id: owner.teamId })).team?.invitations).toEqual([]);
  });

  test('an invitation lapses when whoever sent it no longer owns the team', async () => {
    const first = await t.seed.user();
    const second = await t.seed.user();
    const friend = await t.seed.user();
    const team = await newTeam(first, 'lapsing');
    await accept(second, (await invite(first, team, second.user.email, 'OWNER')).id);
    // The second owner invites a friend as OWNER, then is removed before the friend accepts.
    const invitation = await invite(second, team, friend.user.email, 'OWNER');
    expect((await myInvitations(friend)).map((i) => i.id)).toEqual([invitation.id]);
    const removed = await first.graphql.request(RemoveTeamMemberDocument, { teamId: team, userId: second.user.id });
    expect(removed.removeTeamMember.__typename).toBe('RemoveTeamMemberSuccess');
    expect(await myInvitations(friend)).toEqual([]);
    const late = await friend.graphql.request(AcceptTeamInvitationDocument, { id: invitation.id });
    expect(late.acceptTeamInvitation.__typename).toBe('NotFoundError');
    expect((await friend.graphql.request(TeamDocument, { id: team })).team).toBeNull();
  });

  test('an invitation expires after 14 days: no longer listed, not accepted, not counted; inviting again renews it', async () => {
    const owner = await t.seed.user();
    const friend = await t.seed.user();
    const team = await newTeam(owner, 'expiring');
    const invitation = await invite(owner, team, friend.user.email);
    const days = (Date.parse(invitation.expiresAt) - Date.parse(invitation.createdAt)) / 86_400_000;
    expect(days).toBeCloseTo(14, 5);
    // Fourteen days pass (the clock is the database's).
    await t.sql`UPDATE team_invitations SET created_at = created_at - interval '14 days', expires_at = expires_at - interval '14 days' WHERE id = ${invitation.id}`;
    expect(await myInvitations(friend)).toEqual([]);
    expect((await owner.graphql.request(TeamInvitationsDocument, { id: team })).team?.invitations).toEqual([]);
    const late = await friend.graphql.request(AcceptTeamInvitationDocument, { id: invitation.id });
    expect(late.acceptTeamInvitation.__typename).toBe('NotFoundError');
    expect((await friend.graphql.request(TeamDocument, { id: team })).team).toBeNull();
    // Invited again: the same invitation, valid for 14 days from now.
    const renewed = await invite(owner, team, friend.user.email);
    expect(Date.parse(renewed.expiresAt) - Date.now()).toBeGreaterThan(13.9 * 86_400_000);
    expect((await myInvitations(friend)).map((i) => i.id)).toEqual([renewed.id]);
    await accept(friend, renewed.id);
  });

  test('a team holds at most 100 pending invitations; re-inviting one of them is no new one', async () => {
    const owner = await t.seed.user();
    const team = await newTeam(owner, 'crowded');
    for (let i = 0; i < 100; i++) await invite(owner, team, `guest${i}@example.com`);
    const again = await owner.graphql.request(AddTeamMemberDocument, { teamId: team, user: 'guest7@example.com', role: 'OWNER' });
    expect(again.addTeamMember.__typename).toBe('InviteTeamMemberSuccess');
    const over = await owner.graphql.request(AddTeamMemberDocument, { teamId: team, user: 'guest100@example.com' });
    expect(over.addTeamMember).toMatchObject({
      __typename: 'ConflictError',
      message: expect.stringMatching(/at most 100 pending invitations/),
    });
    // An expired invitation holds no place: once one lapses, another can be sent.
    await t.sql`UPDATE team_invitations SET expires_at = now() - interval '1 second' WHERE team_id = ${team} AND invitee = 'guest3@example.com'`;
    const room = await owner.graphql.request(AddTeamMemberDocument, { teamId: team, user: 'guest100@example.com' });
    expect(room.addTeamMember.__typename).toBe('InviteTeamMemberSuccess');
    expect(await t.sql`SELECT 1 FROM team_invitations WHERE team_id = ${team} AND invitee = 'guest3@example.com'`).toHaveLength(0);
  });

  test('an admin adds at once, and the admin CLI way (the system) too', async () => {
    const owner = await t.seed.user();
    const dana = await t.seed.user();
    const ed = await t.seed.user();
    const { addTeamMember } = await admin.graphql.request(AddTeamMemberDocument, { teamId: owner.teamId, user: dana.user.email });
    expect(addTeamMember).toMatchObject({ __typename: 'AddTeamMemberSuccess', member: { role: 'MEMBER', user: { id: dana.user.id } } });
    expect((await dana.graphql.request(TeamDocument, { id: owner.teamId })).team?.id).toBe(owner.teamId);
    // A pending invitation of someone added at once goes.
    await invite(owner, owner.teamId, ed.user.id);
    const added = await t.services.identity.addTeamMember('system', { teamId: owner.teamId, user: ed.user.email });
    expect(added.type === 'ok' && added.value.type).toBe('member');
    expect(await myInvitations(ed)).toEqual([]);
    expect((await ed.graphql.request(TeamDocument, { id: owner.teamId })).team?.id).toBe(owner.teamId);
  });
});

describe('adding tells the owner nothing about other users', () => {
  test('an unknown email or id gets the same answer as a real one, and an invitation by email waits for its user', async () => {
    const owner = await t.seed.user();
    const real = await t.seed.user();
    const answer = async (user: string) => {
      const { addTeamMember } = await owner.graphql.request(AddTeamMemberDocument, { teamId: owner.teamId, user });
      return addTeamMember;
    };
    const expected = (invitee: string) => ({
      __typename: 'InviteTeamMemberSuccess',
      invitation: {
        id: expect.stringMatching(/^inv_/),
        teamId: owner.teamId,
        teamName: expect.any(String),
        invitee,
        role: 'MEMBER',
        invitedBy: owner.user.name,
        createdAt: expect.any(String),
        expiresAt: expect.any(String),
      },
    });
    expect(await answer(real.user.email)).toEqual(expected(real.user.email));
    expect(await answer('nobody@example.com')).toEqual(expected('nobody@example.com'));
    expect(await answer(real.user.id)).toEqual(expected(real.user.id));
    expect(await answer('usr_doesnotexist0000')).toEqual(expected('usr_doesnotexist0000'));
    // The team's owner sees the four as typed, and nothing else.
    const { team } = await owner.graphql.request(TeamInvitationsDocument, { id: owner.teamId });
    expect(team?.invitations.map((i) => i.invitee)).toEqual([real.user.email, 'nobody@example.com', real.user.id, 'usr_doesnotexist0000']);
    expect(JSON.stringify(team)).not.toContain(real.user.name);
    // Inviting again changes the role of the pending invitation, not the answer's shape.
    expect(await answer('nobody@example.com')).toEqual(expected('nobody@example.com'));

    // Nobody is created by an invitation; a user created later with that email (in any case) finds it waiting.
    expect(await t.services.identity.findUser('nobody@example.com')).toBeUndefined();
    const created = await admin.graphql.request(CreateUserDocument, { email: 'Nobody@Example.com', name: 'Nobody' });
    if (created.createUser.__typename !== 'CreateUserSuccess') throw new Error(created.createUser.__typename);
    const key = await admin.graphql.request(CreateApiKeyDocument, { name: 'k', user: created.createUser.user.id });
    if (key.createApiKey.__typename !== 'CreateApiKeySuccess') throw new Error(key.createApiKey.__typename);
    const nobody = createClient(t.url, key.createApiKey.secret);
    const waiting = (await nobody.request(MyTeamInvitationsDocument)).me.invitations;
    expect(waiting.map((i) => [i.teamId, i.invitee])).toEqual([[owner.teamId, 'nobody@example.com']]);
  });

  test("bad input is the schema's error naming the field", async () => {
    const owner = await t.seed.user();
    const bad = await owner.graphql.request(AddTeamMemberDocument, { teamId: owner.teamId, user: 'not a user' });
    expect(bad.addTeamMember).toMatchObject({
      __typename: 'InvalidArgumentError',
      fields: [{ field: 'user', message: 'must be a user id (usr_…) or an email address' }],
    });
    const blank = await owner.graphql.request(AddTeamMemberDocument, { teamId: owner.teamId, user: ' ' });
    expect(blank.addTeamMember).toMatchObject({ __typename: 'InvalidArgumentError', fields: [{ field: 'user' }] });
    const missing = await owner.graphql.request(AcceptTeamInvitationDocument, { id: 'inv_missing' });
    expect(missing.acceptTeamInvitation.__typename).toBe('NotFoundError');
  });
});

describe('a team keeps an owner', () => {
  test("demoting the last owner is a ConflictError, for the owner and for an admin; another owner's demotion is not", async () => {
    const alice = await t.seed.user();
    const bob = await t.seed.user();
    for (const caller of [alice, admin]) {
      const demoted = await caller.graphql.request(AddTeamMemberDocument, { teamId: alice.teamId, user: alice.user.email, role: 'MEMBER' });
      expect(demoted.addTeamMember).toMatchObject({ __typename: 'ConflictError', message: expect.stringContaining('at least one owner') });
    }
    expect((await alice.graphql.request(TeamsDocument)).teams.find((team) => team.id === alice.teamId)?.myRole).toBe('OWNER');

    // With a second owner, either may be demoted.
    await accept(bob, (await invite(alice, alice.teamId, bob.user.id, 'OWNER')).id);
    const demoted = await alice.graphql.request(AddTeamMemberDocument, { teamId: alice.teamId, user: bob.user.id, role: 'MEMBER' });
    expect(demoted.addTeamMember).toMatchObject({ __typename: 'AddTeamMemberSuccess', member: { role: 'MEMBER' } });
    const lastOwner = await alice.graphql.request(RemoveTeamMemberDocument, { teamId: alice.teamId, userId: alice.user.id });
    expect(lastOwner.removeTeamMember.__typename).toBe('ConflictError');
  });

  test('two owners demoting each other at once: exactly one wins, and the team keeps one owner', async () => {
    const alice = await t.seed.user();
    const bob = await t.seed.user();
    for (let round = 0; round < 4; round++) {
      const teamId = await newTeam(alice, `race ${round}`);
      await accept(bob, (await invite(alice, teamId, bob.user.id, 'OWNER')).id);
      const answers = await Promise.all([
        alice.graphql.request(AddTeamMemberDocument, { teamId, user: bob.user.id, role: 'MEMBER' }),
        bob.graphql.request(AddTeamMemberDocument, { teamId, user: alice.user.email, role: 'MEMBER' }),
      ]);
      // The loser is refused either way: ConflictError when both ran at once (it would demote the last owner), or
      // ForbiddenError when the winner finished first (it is no owner any more). Which one is the machine's timing.
      const [won, lost] = answers.map((a) => a.addTeamMember.__typename).sort();
      expect(won).toBe('AddTeamMemberSuccess');
      expect(['ConflictError', 'ForbiddenError']).toContain(lost);
      const [owners] = await t.sql<
        { n: number }[]
      >`SELECT count(*)::int AS n FROM team_members WHERE team_id = ${teamId} AND role = 'OWNER'`;
      expect(owners!.n).toBe(1);
    }
  });
});

describe('keys and emails', () => {
  test("createApiKey accepts the caller's own email, in any case, and still refuses another user's", async () => {
    const alice = await t.seed.user();
    const bob = await t.seed.user();
    for (const user of [alice.user.email, alice.user.email.toUpperCase(), alice.user.id]) {
      const own = await alice.graphql.request(CreateApiKeyDocument, { name: 'own', user });
      if (own.createApiKey.__typename !== 'CreateApiKeySuccess') throw new Error(`${user}: ${own.createApiKey.__typename}`);
      expect((await createClient(t.url, own.createApiKey.secret).request(MeDocument)).me.user.id).toBe(alice.user.id);
    }
    const other = await alice.graphql.request(CreateApiKeyDocument, { name: 'x', user: bob.user.email });
    expect(other.createApiKey.__typename).toBe('ForbiddenError');
  });

  test('emails are unique whatever their case, stored lower-cased, and found in any case', async () => {
    const created = await admin.graphql.request(CreateUserDocument, { email: 'Eve@Example.com', name: 'Eve' });
    expect(created.createUser).toMatchObject({ __typename: 'CreateUserSuccess', user: { email: 'eve@example.com' } });
    for (const email of ['EVE@example.com', 'eve@example.com', 'eve@EXAMPLE.COM']) {
      const duplicate = await admin.graphql.request(CreateUserDocument, { email, name: 'Eve again' });
      expect(duplicate.createUser.__typename).toBe('ConflictError');
    }
    const key = await admin.graphql.request(CreateApiKeyDocument, { name: 'k', user: 'EVE@EXAMPLE.COM' });
    if (key.createApiKey.__typename !== 'CreateApiKeySuccess') throw new Error(key.createApiKey.__typename);
    expect((await createClient(t.url, key.createApiKey.secret).request(MeDocument)).me.user.email).toBe('eve@example.com');

    // Racing creations of one address in three cases: one user (the unique index decides, not a read before the write).
    const racing = await Promise.all(
      ['Zed@example.com', 'zed@EXAMPLE.com', 'ZED@example.com'].map((email) =>
        admin.graphql.request(CreateUserDocument, { email, name: 'Zed' }),
      ),
    );
    expect(racing.map((r) => r.createUser.__typename).sort()).toEqual(['ConflictError', 'ConflictError', 'CreateUserSuccess']);
    const [zeds] = await t.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM users WHERE lower(email) = 'zed@example.com'`;
    expect(zeds!.n).toBe(1);
    // Plain SQL cannot add a case-duplicate either.
    await expect(t.sql`INSERT INTO users (id, email, name) VALUES ('usr_sqlzed', 'ZeD@example.com', 'x')`).rejects.toThrow(
      /users_email_lower_key/,
    );
  });
});
