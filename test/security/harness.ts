/**
 * A real gateway (real database, services and HTTP server) started with the
 * security options under test, plus raw-socket and WebSocket clients.
 */
import net from 'node:net';
import { startGateway, type Gateway, type GatewayOptions } from '../../src/gateway.js';
import { createServices, type Services } from '../../src/services/index.js';
import { onCleanup } from '../support/cleanup.js';
import { createTestDatabase, queryCounter, type QueryCounter } from '../support/database.js';
import { createSeed, type SeededUser } from '../support/gateway.js';

export interface SecuredGateway {
  gateway: Gateway;
  url: string;
  port: number;
  services: Services;
  /** SQL statements sent since the last reset. */
  queries: QueryCounter;
  /** What the gateway logged. */
  logs: { message: string; error?: unknown }[];
  seed: { user(options?: { admin?: boolean }): Promise<SeededUser> };
}

export async function startSecuredGateway(options: Partial<GatewayOptions> = {}): Promise<SecuredGateway> {
  const queries = queryCounter();
  const logs: SecuredGateway['logs'] = [];
  const db = await createTestDatabase({ onQuery: queries.onQuery });
  const services = createServices(db.sql);
  const gateway = await startGateway(db.sql, services, {
    port: 0,
    host: '127.0.0.1',
    log: (message, error) => logs.push({ message, error }),
    ...options,
  });
  onCleanup(async () => {
    await gateway.close();
    await db.close();
  });
  return {
    gateway,
    url: gateway.url,
    port: Number(new URL(gateway.url).port),
    services,
    queries,
    logs,
    seed: createSeed(services, gateway.url),
  };
}

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Parses one or more HTTP/1.1 responses (Content-Length framed) from raw bytes. */
export function parseResponses(raw: string): RawResponse[] {
  const responses: RawResponse[] = [];
  let rest = raw;
  while (rest.length > 0) {
    const headEnd = rest.indexOf('\r\n\r\n');
    if (headEnd === -1) break;
    const [statusLine, ...lines] = rest.slice(0, headEnd).split('\r\n');
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const length = Number(headers['content-length'] ?? rest.length - headEnd - 4);
    const body = rest.slice(headEnd + 4, headEnd + 4 + length);
    responses.push({ status: Number(statusLine!.split(' ')[1]), headers, body });
    rest = rest.slice(headEnd + 4 + length);
  }
  return responses;
}

/** Writes `request` as it is on a new TCP connection and reads until the server closes it (or `timeoutMs`). */
export function rawExchange(port: number, request: string | Buffer, timeoutMs = 5000): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      resolve(Buffer.concat(chunks).toString('latin1'));
    }, timeoutMs);
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks).toString('latin1'));
    });
    socket.write(request);
  });
}

/** One request line with a Host header, and `Connection: close` so that the exchange ends with the answer. */
export async function rawGet(port: number, target: string, headers: Record<string, string> = {}, method = 'GET'): Promise<RawResponse> {
  const head = Object.entries({ host: `127.0.0.1:${port}`, connection: 'close', ...headers })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  const [response] = parseResponses(await rawExchange(port, `${method} ${target} HTTP/1.1\r\n${head}\r\n`));
  if (!response) throw new Error(`no response to ${method} ${target}`);
  return response;
}

/** One request with a body, over its own connection. */
export async function rawRequest(
  port: number,
  method: string,
  target: string,
  headers: Record<string, string> = {},
  body = '',
): Promise<RawResponse> {
  const all: Record<string, string> = { host: `127.0.0.1:${port}`, connection: 'close', ...headers };
  if (body !== '' || method === 'POST') all['content-length'] = String(Buffer.byteLength(body));
  const head = Object.entries(all)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  const [response] = parseResponses(await rawExchange(port, `${method} ${target} HTTP/1.1\r\n${head}\r\n${body}`));
  if (!response) throw new Error(`no response to ${method} ${target}`);
  return response;
}

/** POSTs a GraphQL operation as JSON; answers the status and the parsed body. */
export async function postGraphQL(
  url: string,
  key: string | undefined,
  query: string,
  variables?: Record<string, unknown>,
  headers: Record<string, string> = {},
  operationName?: string,
) {
  const response = await fetch(`${url}/graphql`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json',
      ...(key ? { authorization: `Bearer ${key}` } : {}),
      ...headers,
    },
    body: JSON.stringify({ query, ...(variables ? { variables } : {}), ...(operationName ? { operationName } : {}) }),
  });
  const text = await response.text();
  let body: any;
  try {
    body = JSON.parse(text);
  } catch {
    body = text;
  }
  return { status: response.status, headers: response.headers, body };
}
