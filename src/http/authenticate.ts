/**
 * Request authentication, the same for every surface: REST, chat, GraphQL
 * over HTTP, SSE and WebSocket. A caller presents credentials (a bearer key,
 * and optionally a team to act as); each transport reads them from where it
 * carries them (headers, or a WebSocket's `connection_init` payload), and
 * `authenticate` checks them through the auth service (cached there).
 */
import type { IncomingMessage } from 'node:http';
import { fail, invalidArgument, type Result } from '../domain/result.js';
import type { Services } from '../services/index.js';
import { TEAM_HEADERS, type Principal } from '../services/principal.js';

/** What a caller authenticates with (the access watch checks them again later). */
export interface Credentials {
  authorization: string | undefined;
  /** The team to act as (`X-Friendli-Team`, or its alias `X-Team-Id`). */
  team: string | undefined;
  /** The two team headers (or connection_init keys) name different teams: refused, not one of them picked. */
  teamConflict?: true;
}

/** The team named once, or a conflict when several names of it (a header and its alias) disagree. */
function teamOf(values: readonly unknown[]): Pick<Credentials, 'team' | 'teamConflict'> {
  const named = [...new Set(values.filter((v): v is string => typeof v === 'string' && v !== ''))];
  return named.length > 1 ? { team: named[0], teamConflict: true } : { team: named[0] };
}

/** A request header's (first) value. */
export function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function fromHeaders(get: (name: string) => string | null | undefined): Credentials {
  return { authorization: get('authorization') ?? undefined, ...teamOf(TEAM_HEADERS.map((name) => get(name))) };
}

/** The credentials of a Node request (REST, chat, SSE). */
export function credentialsOfRequest(req: IncomingMessage): Credentials {
  return fromHeaders((name) => header(req, name));
}

/** The credentials of a fetch API request (GraphQL over HTTP, through yoga). */
export function credentialsOfFetchRequest(request: { headers: { get(name: string): string | null } }): Credentials {
  return fromHeaders((name) => request.headers.get(name));
}

/** Keys of a WebSocket `connection_init` payload that name the team, in order. */
const CONNECTION_TEAM_KEYS = [...TEAM_HEADERS, 'teamId'];

/** The credentials of a graphql-ws `connection_init` payload. */
export function credentialsOfConnectionParams(params: Readonly<Record<string, unknown>>): Credentials {
  const authorization = typeof params.authorization === 'string' ? params.authorization : undefined;
  return { authorization, ...teamOf(CONNECTION_TEAM_KEYS.map((k) => params[k])) };
}

/** The caller, or UNAUTHENTICATED / FORBIDDEN. Throws only when the database fails. */
export function authenticate(services: Services, credentials: Credentials): Promise<Result<Principal>> {
  if (credentials.teamConflict) {
    const message = `names another team than X-Friendli-Team: send one team, in either header (${TEAM_HEADERS.join(', ')})`;
    return Promise.resolve(fail(invalidArgument([{ field: 'X-Team-Id', message }])));
  }
  return services.auth.authenticate(credentials.authorization, credentials.team);
}

/** The caller of a Node request. */
export function authenticateRequest(services: Services, req: IncomingMessage): Promise<Result<Principal>> {
  return authenticate(services, credentialsOfRequest(req));
}
