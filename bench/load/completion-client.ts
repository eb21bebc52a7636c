/**
 * Decoding-throughput load (a child process of the batching benchmark): for
 * each level, `level` closed-loop workers send non-streamed chat completions
 * for `durationMs` and the completion tokens the answers report are summed.
 */
import http from 'node:http';
import { childMain } from '../lib/env.js';

export interface CompletionLoadConfig {
  url: string;
  headers: Record<string, string>;
  model?: string;
  levels: number[];
  maxTokens: number;
  durationMs: number;
}

export interface CompletionLoadResult {
  throughput: { level: number; tokens: number; seconds: number; tokensPerSecond: number; requests: number; errors: number }[];
  errorSamples: string[];
}

childMain<CompletionLoadConfig, CompletionLoadResult>(async (config) => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const errorSamples: string[] = [];
  const once = (seed: number) =>
    new Promise<number | undefined>((resolve) => {
      const body = JSON.stringify({
        ...(config.model ? { model: config.model } : {}),
        messages: [{ role: 'user', content: 'Hi there, tell me something.' }],
        max_tokens: config.maxTokens,
        temperature: 0.8,
        seed,
      });
      const req = http.request(
        config.url,
        {
          method: 'POST',
          agent,
          headers: { ...config.headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('end', () => {
            try {
              const parsed = JSON.parse(text) as { usage?: { completion_tokens?: number } };
              if (res.statusCode === 200 && typeof parsed.usage?.completion_tokens === 'number')
                return resolve(parsed.usage.completion_tokens);
            } catch {
              // reported below
            }
            if (errorSamples.length < 5) errorSamples.push(`HTTP ${res.statusCode}: ${text.slice(0, 200)}`);
            resolve(undefined);
          });
        },
      );
      req.on('error', (e) => {
        if (errorSamples.length < 5) errorSamples.push(e.message);
        resolve(undefined);
      });
      req.end(body);
    });
  const throughput: CompletionLoadResult['throughput'] = [];
  let seed = 0;
  for (const level of config.levels) {
    const start = performance.now();
    const end = start + config.durationMs;
    let tokens = 0;
    let requests = 0;
    let errors = 0;
    await Promise.all(
      Array.from({ length: level }, async () => {
        while (performance.now() < end) {
          const n = await once(++seed);
          if (n === undefined) errors++;
          else {
            tokens += n;
            requests++;
          }
        }
      }),
    );
    const seconds = (performance.now() - start) / 1000;
    throughput.push({ level, tokens, seconds, tokensPerSecond: tokens / seconds, requests, errors });
  }
  agent.destroy();
  return { throughput, errorSamples };
});
