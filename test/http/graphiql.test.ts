/**
 * GraphiQL without a CDN (issue 19): GET /graphql from a browser answers
 * GraphiQL whose scripts, styles, workers and icon come from this gateway
 * (inlined from `@graphql-yoga/render-graphiql`), so that it works offline
 * and loads nothing from another host; its headers pane holds the
 * Authorization header to fill in, and its default query works with a key.
 *
 * These tests run without network: a page that needed a CDN would be blank.
 */
import { renderGraphiQL as renderCdnGraphiQL } from 'graphql-yoga';
import { beforeAll, describe, expect, test } from 'vitest';
import { GRAPHIQL_OPTIONS } from '../../src/http/graphql/yoga.js';
import { startTestGateway, type SeededUser, type TestGateway } from '../support/gateway.js';

let t: TestGateway;
let alice: SeededUser;

beforeAll(async () => {
  t = await startTestGateway();
  alice = await t.seed.user();
});

/** Hosts that serve front-end packages or fonts: none may be named anywhere in the page. */
const CDN_HOSTS =
  /\b(?:unpkg\.com|cdn\.jsdelivr\.net|jsdelivr|esm\.sh|cdnjs\.cloudflare\.com|cdn\.skypack\.dev|jspm\.io|ga\.jspm|fonts\.googleapis\.com|fonts\.gstatic\.com|ajax\.googleapis\.com|raw\.githubusercontent\.com)\b/gi;

/**
 * What a browser would fetch from an absolute http(s) URL in a script: a
 * module import, a worker, a fetch, a socket, an element's `src`. (The
 * bundles also hold URLs that are never loaded: XML namespaces, links in
 * error messages and docs, GraphiQL's "about" links. Those are not requests.)
 */
const SCRIPT_LOADS = [
  /\b(?:import|importScripts|fetch|Worker|SharedWorker|EventSource|WebSocket)\s*\(\s*["'`]https?:\/\/[^"'`]*/g,
  /\bfrom\s*["'`]https?:\/\/[^"'`]*/g,
  /\bsrc\s*[:=]\s*["'`]https?:\/\/[^"'`]*/g,
];

/** What a browser would fetch from a style sheet. */
const STYLE_LOADS = [/url\(\s*["']?https?:\/\/[^)]*/g, /@import\b[^;]*/g];

interface Page {
  /** The markup with inline script and style bodies taken out. */
  markup: string;
  scripts: string[];
  styles: string[];
  /** `src` and `href` attribute values, as written. */
  references: { tag: string; attribute: string; url: string; rel?: string }[];
}

function parsePage(html: string): Page {
  const scripts: string[] = [];
  const styles: string[] = [];
  const markup = html
    .replace(/<script\b[^>]*>([\s\S]*?)<\/script>/gi, (whole, body: string) => {
      scripts.push(body);
      return whole.replace(body, '');
    })
    .replace(/<style\b[^>]*>([\s\S]*?)<\/style>/gi, (_whole, body: string) => {
      styles.push(body);
      return '<style></style>';
    });
  const references: Page['references'] = [];
  for (const [, tag, attributes] of markup.matchAll(/<([a-z][a-z0-9-]*)\b([^>]*)>/gi)) {
    const rel = /\brel\s*=\s*["']?([^"'\s>]+)/i.exec(attributes!)?.[1];
    for (const [, attribute, url] of attributes!.matchAll(/\b(src|href|srcset|poster|data)\s*=\s*["']?([^"'\s>]+)/gi)) {
      references.push({ tag: tag!.toLowerCase(), attribute: attribute!.toLowerCase(), url: url!, ...(rel ? { rel } : {}) });
    }
  }
  return { markup, scripts, styles, references };
}

/** Everything in a page (and what it references) that would reach another host than `origin`. */
function foreignLoads(page: Page, origin: string, fetched: { scripts: string[]; styles: string[] } = { scripts: [], styles: [] }) {
  const found: string[] = [];
  for (const { url } of page.references) {
    if (url.startsWith('data:') || url.startsWith('blob:') || url.startsWith('#')) continue;
    if (/^(?:[a-z][a-z0-9+.-]*:)?\/\//i.test(url) && new URL(url, origin).origin !== origin) found.push(url);
  }
  // The markup itself names no other host at all.
  for (const [url] of page.markup.matchAll(/https?:\/\/[^\s"'<>)]+/gi)) if (new URL(url).origin !== origin) found.push(url);
  const scripts = [...page.scripts, ...fetched.scripts];
  const styles = [...page.styles, ...fetched.styles];
  for (const text of [...scripts, ...styles, page.markup]) for (const [host] of text.matchAll(CDN_HOSTS)) found.push(host);
  for (const text of scripts) for (const pattern of SCRIPT_LOADS) for (const [load] of text.matchAll(pattern)) found.push(load);
  for (const text of styles) for (const pattern of STYLE_LOADS) for (const [load] of text.matchAll(pattern)) found.push(load);
  return found.filter((load) => !load.includes(origin));
}

const EXPECTED_TYPES: Record<string, RegExp> = {
  script: /^(?:text|application)\/javascript\b/,
  stylesheet: /^text\/css\b/,
  icon: /^image\//,
};

async function getGraphiQL(headers: Record<string, string> = {}) {
  return fetch(`${t.url}/graphql`, { headers: { accept: 'text/html,application/xhtml+xml', ...headers } });
}

describe('GraphiQL at GET /graphql', () => {
  test('answers 200 HTML that loads nothing from another host; every local asset answers with its type', async () => {
    const res = await getGraphiQL();
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html\b/);
    const html = await res.text();
    expect(html).toMatch(/^\s*<!doctype html>/i);
    const page = parsePage(html);
    // The application is there: its script and its styles, inlined.
    expect(page.scripts.join('')).toContain('renderYogaGraphiQL');
    expect(page.styles.join('').length).toBeGreaterThan(10_000);

    // Local assets (none today: everything is inlined) answer 200 with the right content type.
    const fetched = { scripts: [] as string[], styles: [] as string[] };
    const local = page.references.filter(({ url }) => !/^(?:data:|blob:|#)/.test(url) && new URL(url, t.url).origin === t.url);
    for (const reference of local) {
      const asset = await fetch(new URL(reference.url, `${t.url}/graphql`));
      expect(asset.status, reference.url).toBe(200);
      const kind = reference.tag === 'script' ? 'script' : reference.rel?.includes('stylesheet') ? 'stylesheet' : reference.rel;
      const expected = kind ? EXPECTED_TYPES[kind] : undefined;
      if (expected) expect(asset.headers.get('content-type'), reference.url).toMatch(expected);
      if (kind === 'script') fetched.scripts.push(await asset.text());
      else if (kind === 'stylesheet') fetched.styles.push(await asset.text());
      else await asset.arrayBuffer();
    }
    expect(foreignLoads(page, t.url, fetched)).toEqual([]);
    // The icon is a data: URL, not the default one on GitHub.
    expect(page.references.find((r) => r.rel === 'icon')?.url).toMatch(/^data:image\//);

    // GraphiQL runs inline scripts and blob: workers; a Content-Security-Policy that governs scripts, if one is ever
    // added, must allow them (the one every answer carries says only who may frame it).
    const csp = res.headers.get('content-security-policy');
    if (csp !== null && /(?:default|script|worker)-src/.test(csp)) {
      expect(csp).toContain("'unsafe-inline'");
      expect(csp).toContain('blob:');
    }
  });

  test("the check above catches a CDN page: yoga's default renderer fails it", () => {
    const page = parsePage(renderCdnGraphiQL({}));
    const found = foreignLoads(page, t.url);
    expect(found.some((load) => load.includes('unpkg.com'))).toBe(true);
  });

  test('the headers pane holds the Authorization header to fill in, and a default query', async () => {
    const html = await (await getGraphiQL()).text();
    const options = JSON.parse(/renderYogaGraphiQL\(\s*window\.document\.querySelector\('#root'\),\s*(\{.*\}),\s*\);/s.exec(html)![1]!);
    expect(options).toMatchObject({
      headers: expect.stringContaining('"Authorization": "Bearer <your API key>"'),
      defaultHeaders: expect.stringContaining('"Authorization": "Bearer <your API key>"'),
      // The first tab's query (what yoga's GraphiQL reads) and new tabs'.
      query: expect.stringMatching(/^#.*API key.*\n\{\n {2}me \{\n {4}user \{\n {6}email\n/),
      defaultQuery: GRAPHIQL_OPTIONS.query,
      defaultEditorToolsVisibility: 'headers',
      shouldPersistHeaders: false,
    });
    expect(JSON.parse(options.headers)).toEqual({ Authorization: 'Bearer <your API key>' });
  });

  test('the default query answers with a key in the Authorization header, as GraphiQL sends it', async () => {
    const headers = JSON.parse(GRAPHIQL_OPTIONS.headers.replace('<your API key>', alice.key)) as Record<string, string>;
    const res = await fetch(`${t.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json, application/json', ...headers },
      body: JSON.stringify({ query: GRAPHIQL_OPTIONS.query }),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ data: { me: { user: { email: alice.user.email } } } });
  });

  test('with the placeholder left in, the query answers 401 with a message that says what to do', async () => {
    const headers = JSON.parse(GRAPHIQL_OPTIONS.headers) as Record<string, string>;
    const res = await fetch(`${t.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ query: GRAPHIQL_OPTIONS.query }),
    });
    expect(res.status).toBe(401);
    const body = (await res.json()) as { errors: { message: string; extensions: { code: string } }[] };
    expect(body.errors[0]!.extensions.code).toBe('UNAUTHENTICATED');
  });

  test('a request for JSON on GET /graphql still gets GraphQL, not the page', async () => {
    const res = await fetch(`${t.url}/graphql?query=${encodeURIComponent('{ me { user { email } } }')}`, {
      headers: { accept: 'application/json', authorization: `Bearer ${alice.key}` },
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ data: { me: { user: { email: alice.user.email } } } });
  });
});

test('GraphiQL, the API and their errors carry the protective headers: never framed by another site, never sniffed', async () => {
  const answers = [
    await fetch(`${t.url}/graphql`, { headers: { accept: 'text/html' } }),
    await fetch(`${t.url}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }),
    await fetch(`${t.url}/dedicated/beta/endpoint/ep_none`, { headers: { authorization: `Bearer ${alice.key}` } }),
    await fetch(`${t.url}/nothing-here`),
  ];
  for (const res of answers) {
    expect(res.headers.get('x-frame-options'), res.url).toBe('DENY');
    expect(res.headers.get('content-security-policy'), res.url).toContain("frame-ancestors 'none'");
    expect(res.headers.get('x-content-type-options'), res.url).toBe('nosniff');
    expect(res.headers.get('referrer-policy'), res.url).toBe('no-referrer');
    await res.arrayBuffer();
  }
});
