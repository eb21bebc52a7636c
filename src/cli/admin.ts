/**
 * `npm run admin -- <command> [--flag value ...]`: manages users, teams,
 * members, projects and API keys directly in the database, as the system
 * (no key needed). It uses the configured database: DATABASE_URL, or the
 * embedded one under DATA_DIR (adopted if `npm start` is running); it says
 * which on stderr, and refuses to run where DATA_DIR holds no database.
 */
import { parseArgs } from 'node:util';
import { loadConfig } from '../config.js';
import type { Result } from '../domain/result.js';
import { createServices, type Services } from '../services/index.js';
import type { Principal } from '../services/principal.js';
import type { TeamRole } from '../domain/identity.js';
import { exitOnFailure, openCliDatabase, UsageError } from './cli-database.js';

const USAGE = `Usage: npm run admin -- <command> [options]

Commands:
  create-user    --email E --name N [--admin]        a user (with a personal team)
  create-key     --user ID|EMAIL [--name N]          an API key; printed once
  list-keys      --user ID|EMAIL                     the user's keys (prefixes only)
  revoke-key     --id KEY_ID
  create-team    --name N --owner ID|EMAIL
  add-member     --team TEAM_ID --user ID|EMAIL [--role OWNER|MEMBER]
  create-project --team TEAM_ID --name N`;

function required(values: Record<string, unknown>, name: string): string {
  const value = values[name];
  if (typeof value !== 'string' || value === '') throw new UsageError(`--${name} is required`);
  return value;
}

function unwrap<T>(result: Result<T>): T {
  if (result.type === 'error') {
    const fields = result.error.type === 'INVALID_ARGUMENT' ? result.error.fields.map((f) => `\n  ${f.field}: ${f.message}`).join('') : '';
    throw new UsageError(`${result.error.message}${fields}`);
  }
  return result.value;
}

/** Commands that act for a user (a team owner) borrow that user's identity. */
async function principalFor(services: Services, idOrEmail: string): Promise<Principal> {
  const principal = await services.identity.actAs(idOrEmail);
  if (!principal) throw new UsageError(`user '${idOrEmail}' not found`);
  return principal;
}

export async function runAdmin(argv: string[], services: Services, print: (line: string) => void): Promise<void> {
  const [command, ...rest] = argv;
  const { values } = parseArgs({
    args: rest,
    options: {
      email: { type: 'string' },
      name: { type: 'string' },
      admin: { type: 'boolean' },
      user: { type: 'string' },
      id: { type: 'string' },
      owner: { type: 'string' },
      team: { type: 'string' },
      role: { type: 'string' },
    },
    strict: true,
  });
  const { identity } = services;
  switch (command) {
    case 'create-user': {
      const user = unwrap(
        await identity.createUser('system', {
          email: required(values, 'email'),
          name: required(values, 'name'),
          isAdmin: values.admin ?? false,
        }),
      );
      print(`user ${user.id} ${user.email}${user.isAdmin ? ' (admin)' : ''}; personal team ${user.defaultTeamId}`);
      return;
    }
    case 'create-key': {
      const key = unwrap(await identity.createApiKey('system', { user: required(values, 'user'), name: values.name ?? 'cli' }));
      print(`key ${key.record.id} for ${key.record.userId}`);
      print(key.secret);
      return;
    }
    case 'list-keys': {
      const principal = await principalFor(services, required(values, 'user'));
      for (const key of await identity.listApiKeys(principal)) {
        print(`${key.id}  ${key.prefix}…  ${key.name}  created ${key.createdAt.toISOString()}${key.revokedAt ? '  REVOKED' : ''}`);
      }
      return;
    }
    case 'revoke-key': {
      const key = unwrap(await identity.revokeApiKey('system', required(values, 'id')));
      print(`revoked ${key.id}`);
      return;
    }
    case 'create-team': {
      const team = unwrap(
        await identity.createTeam(await principalFor(services, required(values, 'owner')), { name: required(values, 'name') }),
      );
      print(`team ${team.id} ${team.name}`);
      return;
    }
    case 'add-member': {
      const role = (values.role ?? 'MEMBER').toUpperCase();
      if (role !== 'OWNER' && role !== 'MEMBER') throw new UsageError('--role must be OWNER or MEMBER');
      const added = unwrap(
        await identity.addTeamMember('system', {
          teamId: required(values, 'team'),
          user: required(values, 'user'),
          role: role as TeamRole,
        }),
      );
      // The system adds members at once: only a team owner's addition is an invitation.
      if (added.type === 'invitation') throw new Error(`expected a member, got an invitation of ${added.invitation.invitee}`);
      print(`user ${added.member.userId} is ${added.member.role} of team ${added.member.teamId}`);
      return;
    }
    case 'create-project': {
      const teamId = required(values, 'team');
      const name = required(values, 'name');
      const ownerId = await services.identity.earliestMemberOf(teamId);
      if (!ownerId) throw new UsageError(`team '${teamId}' not found`);
      const project = unwrap(await identity.createProject(await principalFor(services, ownerId), { teamId, name }));
      print(`project ${project.id} ${project.name} in team ${project.teamId}`);
      return;
    }
    default:
      throw new UsageError(command ? `unknown command '${command}'\n\n${USAGE}` : USAGE);
  }
}

async function main(): Promise<void> {
  // Help needs no database: it is read before one is opened (or found missing).
  const [command] = process.argv.slice(2);
  if (command === undefined || ['help', '--help', '-h'].includes(command)) {
    if (command === undefined) throw new UsageError(USAGE);
    return void console.log(USAGE);
  }
  const database = await openCliDatabase(loadConfig());
  try {
    await runAdmin(process.argv.slice(2), createServices(database.sql), (line) => console.log(line));
  } finally {
    await database.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch(exitOnFailure('admin command'));
}
