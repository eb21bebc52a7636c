/**
 * Request authentication, the same for every surface: REST, chat, GraphQL
 * over HTTP, SSE and WebSocket. A caller presents credentials (a bearer key,
 * and optionally a team to act as); each transport reads them from where it
 * carries them (headers, or a WebSocket's `connection_init` payload), and
 * `authenticate` checks them through the auth service (cached there).
 */
import type { IncomingMessage } from 'node:http';
import type { Result } from '../domain/result.js';
import type { Services } from '../services/index.js';
import { TEAM_HEADERS, type Principal } from '../services/principal.js';

/** What a caller authenticates with (the access watch checks them again later). */
export interface Credentials {
  authorization: string | undefined;
  /** The team to act as (`X-Friendli-Team`, or its alias `X-Team-Id`). */
  team: string | undefined;
}

/** A request header's (first) value. */
export function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function fromHeaders(get: (name: string) => string | null | undefined): Credentials {
  let team: string | undefined;
  for (const name of TEAM_HEADERS) {
    const value = get(name);
    if (value) {
      team = value;
      break;
    }
  }
  return { authorization: get('authorization') ?? undefined, team };
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
  const team = CONNECTION_TEAM_KEYS.map((k) => params[k]).find((v): v is string => typeof v === 'string');
  return { authorization, team };
}

/** The caller, or UNAUTHENTICATED / FORBIDDEN. Throws only when the database fails. */
export function authenticate(services: Services, credentials: Credentials): Promise<Result<Principal>> {
  return services.auth.authenticate(credentials.authorization, credentials.team);
}

/** The caller of a Node request. */
export function authenticateRequest(services: Services, req: IncomingMessage): Promise<Result<Principal>> {
  return authenticate(services, credentialsOfRequest(req));
}
