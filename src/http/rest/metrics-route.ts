/**
 * `GET /metrics`: this process's figures in the Prometheus text format. It
 * takes `Authorization: Bearer <token>` with either the scrape token
 * (METRICS_TOKEN) or the API key of an admin: other keys get 403, none or an
 * unknown one 401.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { GatewayPrometheus } from '../../router/prometheus.js';
import type { Services } from '../../services/index.js';
import { header } from '../authenticate.js';
import { sendJson } from '../body.js';

export const METRICS_PATH = '/metrics';

const digest = (text: string) => createHash('sha256').update(text).digest();

function bearer(req: IncomingMessage): string | undefined {
  return /^Bearer\s+(\S+)\s*$/i.exec(header(req, 'authorization') ?? '')?.[1];
}

export function metricsRoute(services: Services, prometheus: GatewayPrometheus, scrapeToken: string | undefined) {
  const expected = scrapeToken ? digest(scrapeToken) : undefined;
  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      return sendJson(res, 405, { error: { code: 'METHOD_NOT_ALLOWED', message: 'use GET' } }, { allow: 'GET, HEAD' });
    }
    const token = bearer(req);
    // Hashes of equal length, compared in constant time.
    const byToken = expected !== undefined && token !== undefined && timingSafeEqual(digest(token), expected);
    if (!byToken) {
      const principal = await services.auth.authenticate(header(req, 'authorization'), undefined);
      if (principal.type === 'error') {
        return sendJson(
          res,
          401,
          { error: { code: 'UNAUTHENTICATED', message: principal.error.message } },
          { 'www-authenticate': 'Bearer' },
        );
      }
      if (!principal.value.user.isAdmin) {
        return sendJson(res, 403, {
          error: { code: 'FORBIDDEN', message: '/metrics needs the API key of an admin, or the scrape token (METRICS_TOKEN)' },
        });
      }
    }
    const text = await prometheus.text();
    res.writeHead(200, { 'content-type': prometheus.contentType, 'content-length': Buffer.byteLength(text) });
    res.end(req.method === 'HEAD' ? undefined : text);
  };
}
