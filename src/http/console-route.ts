/**
 * The web console (src/console, built by `npm run build` into dist/console)
 * at `/`: its page and its hashed assets, served by sirv with ETags. The
 * page is never cached (it names the current assets); the assets are
 * immutable. A strict Content-Security-Policy keeps the page to its own
 * scripts and its own origin (GraphQL over HTTP and WebSocket).
 */
import { statSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { fileURLToPath } from 'node:url';
import sirv from 'sirv';

export const CONSOLE_DIR = fileURLToPath(new URL('../../dist/console', import.meta.url));
const ASSETS_PREFIX = '/assets/';

const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  // Style sheets from our own origin only, and no inline <style> or style attribute: React and the charts (uPlot) set
  // styles through the CSSOM (element.style), which a policy does not govern. test/console/browser.ts fails a page that
  // meets a violation.
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "object-src 'none'",
].join('; ');

/**
 * The headers every answer of the gateway carries, whatever serves it (the API's JSON, GraphiQL's page, an error):
 * never framed by another site (GraphiQL asks for a key: a framed one could be used to trick a user into typing it),
 * never sniffed as another type, no referrer sent on. The console's page and assets add their whole policy.
 */
export function baseSecurityHeaders(res: ServerResponse): void {
  res.setHeader('content-security-policy', "frame-ancestors 'none'");
  res.setHeader('x-content-type-options', 'nosniff');
  res.setHeader('referrer-policy', 'no-referrer');
  res.setHeader('x-frame-options', 'DENY');
}

function securityHeaders(res: ServerResponse): void {
  baseSecurityHeaders(res);
  res.setHeader('content-security-policy', CONTENT_SECURITY_POLICY);
}

/** True for the paths the console owns: the page and its assets. */
export function isConsolePath(pathname: string): boolean {
  return pathname === '/' || pathname === '/index.html' || pathname.startsWith(ASSETS_PREFIX);
}

export type ConsoleHandler = (req: IncomingMessage, res: ServerResponse, pathname: string) => void;

function builtAt(dir: string): number | undefined {
  try {
    return statSync(`${dir}/index.html`).mtimeMs;
  } catch {
    return undefined;
  }
}

export function consoleRoute(dir = CONSOLE_DIR): ConsoleHandler {
  let serve: ReturnType<typeof sirv> | undefined;
  let servedBuild: number | undefined;
  const files = (): ReturnType<typeof sirv> | undefined => {
    // sirv lists the files once: a build made while the gateway runs (npm run build) gets a new list, so that an
    // asset it deleted is a 404 (sirv would open the missing file).
    const build = builtAt(dir);
    if (build === undefined) return undefined;
    if (build !== servedBuild || !serve) {
      servedBuild = build;
      serve = sirv(dir, {
        etag: true,
        dotfiles: false,
        setHeaders: (res, pathname) => {
          securityHeaders(res);
          res.setHeader('cache-control', pathname.startsWith(ASSETS_PREFIX) ? 'public, max-age=31536000, immutable' : 'no-cache');
        },
      });
    }
    return serve;
  };
  return (req, res, pathname) => {
    // Every answer here, the 404s, 405s and 503s too, carries the page's protections.
    securityHeaders(res);
    const notFound = () => {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end(`no such console file: ${pathname}\n`);
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain; charset=utf-8' }).end('the console is read with GET\n');
      return;
    }
    const handler = files();
    if (!handler) {
      res
        .writeHead(503, { 'content-type': 'text/plain; charset=utf-8', 'retry-after': '10' })
        .end('The web console is not built. Run `npm run build` (npm ci runs it), then reload. The API is unaffected.\n');
      return;
    }
    // Whole files only: the assets are small, and sirv mishandles some ranges (bytes=10-3 threw after its 206 head).
    delete req.headers.range;
    // A file gone between the listing and the read (a build in progress) ends this answer, never the process:
    // sirv pipes a read stream with no error listener of its own.
    res.once('pipe', (source: NodeJS.ReadableStream) => source.once('error', () => res.destroy()));
    handler(req, res, notFound);
  };
}
