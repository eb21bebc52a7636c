/**
 * Relays a routed answer to a client as it arrives, measuring it on the way:
 * time to the first token, token usage and finish reason. REST passes the
 * events through synchronously, one write per upstream chunk; GraphQL reads
 * them as an async stream and parses them.
 */
import type { Writable } from 'node:stream';
import type { RoutedRequest } from './chat-router.js';
import { sseData } from './sse.js';

const FIRST_TOKEN = /"(?:reasoning_)?content":"[^"]/;
const FINISH_KEY = '"finish_reason":"';
/** A usage object, not the `"usage":null` that OpenAI-style engines put in every chunk. */
const USAGE = /"usage":\s*\{/;

interface Usage {
  prompt_tokens?: number;
  completion_tokens?: number;
}

/** Watches the events of one streamed answer and records the outcome once. */
class StreamMeter {
  private ttftMs: number | null = null;
  private usage: Usage | null = null;
  private finishReason: string | null = null;
  completed = false;

  constructor(private readonly routed: RoutedRequest) {}

  /**
   * Looks at one event's data; false when it is not to be passed on (the
   * usage chunk, always requested upstream, that the client did not ask for).
   */
  observe(data: string): boolean {
    if (data === '[DONE]') {
      this.completed = true;
      return true;
    }
    if (this.ttftMs === null && FIRST_TOKEN.test(data)) this.ttftMs = performance.now() - this.routed.startedAt;
    if (USAGE.test(data)) {
      const chunk = JSON.parse(data) as { usage?: Usage; choices?: unknown[] };
      if (chunk.usage) this.usage = chunk.usage;
      if (chunk.choices?.length === 0 && !this.routed.request.includeUsage) return false;
    }
    // Plain substring searches: this runs for every relayed token.
    const finish = data.indexOf(FINISH_KEY);
    if (finish >= 0) {
      const start = finish + FINISH_KEY.length;
      this.finishReason = data.slice(start, data.indexOf('"', start));
    }
    return true;
  }

  finish(): void {
    if (!this.completed) this.routed.upstream.destroy();
    this.routed.finish({
      promptTokens: this.usage?.prompt_tokens ?? null,
      completionTokens: this.usage?.completion_tokens ?? null,
      ttftMs: this.ttftMs,
      finishReason: this.finishReason,
      cancelled: !this.completed,
    });
  }
}

/**
 * The `data:` payloads of a streamed answer, `[DONE]` included, for consumers
 * that parse them. The slot is released when the stream ends or the consumer
 * stops.
 */
export async function* relayStream(routed: RoutedRequest): AsyncGenerator<string> {
  const meter = new StreamMeter(routed);
  try {
    for await (const data of sseData(routed.upstream)) {
      if (meter.observe(data)) yield data;
    }
  } finally {
    meter.finish();
  }
}

/**
 * Passes a streamed answer's events through to `out` as they arrive: each
 * upstream chunk is split into events and written at once, with
 * backpressure. Resolves when the answer ended or either side went away.
 */
export function pipeStream(routed: RoutedRequest, out: Writable): Promise<void> {
  const meter = new StreamMeter(routed);
  const { upstream } = routed;
  let buffer = '';
  return new Promise<void>((resolve) => {
    let settled = false;
    const done = () => {
      if (settled) return;
      settled = true;
      meter.finish();
      resolve();
    };
    upstream.setEncoding('utf8');
    upstream.on('data', (chunk: string) => {
      buffer += chunk;
      let text = '';
      for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = event.startsWith('data: ') ? event.slice(6) : event.replace(/^data:\s?/, '');
        if (meter.observe(data)) text += `data: ${data}\n\n`;
      }
      if (text && !out.write(text)) {
        upstream.pause();
        out.once('drain', () => upstream.resume());
      }
    });
    upstream.once('end', done);
    upstream.once('error', done);
    upstream.once('close', done);
    out.once('close', done);
  });
}

/** The whole body of a non-streamed answer (one JSON document), measured. */
export async function collectBody(routed: RoutedRequest): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let completed = false;
  try {
    for await (const chunk of routed.upstream) chunks.push(chunk as Buffer);
    completed = true;
  } finally {
    const body = Buffer.concat(chunks);
    let usage: Usage | undefined;
    let finishReason: string | null = null;
    if (completed && routed.upstream.statusCode === 200) {
      try {
        const parsed = JSON.parse(body.toString('utf8')) as { usage?: Usage; choices?: { finish_reason?: string }[] };
        usage = parsed.usage;
        finishReason = parsed.choices?.[0]?.finish_reason ?? null;
      } catch {
        // recorded without usage
      }
    }
    routed.finish({
      promptTokens: usage?.prompt_tokens ?? null,
      completionTokens: usage?.completion_tokens ?? null,
      ttftMs: completed ? performance.now() - routed.startedAt : null,
      finishReason,
      cancelled: !completed,
    });
  }
  return Buffer.concat(chunks);
}
