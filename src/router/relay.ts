/**
 * Relays a routed answer to a client as it arrives, measuring it on the way:
 * time to the first token, token usage and finish reason. Both surfaces use
 * it: REST writes each event through unchanged, GraphQL parses it.
 */
import type { RoutedRequest } from './chat-router.js';
import { sseData } from './sse.js';

const FIRST_TOKEN = /"(?:reasoning_)?content":"[^"]/;
const FINISH = /"finish_reason":"(\w+)"/;

interface Usage {
  prompt_tokens?: number;
  completion_tokens?: number;
}

/**
 * The `data:` payloads of a streamed answer, `[DONE]` included. The usage
 * chunk (always requested upstream) is passed on only when the client asked
 * for it. The slot is released when the stream ends or the consumer stops.
 */
export async function* relayStream(routed: RoutedRequest): AsyncGenerator<string> {
  let ttftMs: number | null = null;
  let usage: Usage | null = null;
  let finishReason: string | null = null;
  let completed = false;
  try {
    for await (const data of sseData(routed.upstream)) {
      if (data === '[DONE]') {
        completed = true;
        yield data;
        continue;
      }
      if (ttftMs === null && FIRST_TOKEN.test(data)) ttftMs = performance.now() - routed.startedAt;
      if (data.includes('"usage"')) {
        const chunk = JSON.parse(data) as { usage?: Usage; choices?: unknown[] };
        if (chunk.usage) usage = chunk.usage;
        if (chunk.choices?.length === 0 && !routed.request.includeUsage) continue;
      }
      const finish = FINISH.exec(data);
      if (finish) finishReason = finish[1]!;
      yield data;
    }
  } finally {
    if (!completed) routed.upstream.destroy();
    routed.finish({
      promptTokens: usage?.prompt_tokens ?? null,
      completionTokens: usage?.completion_tokens ?? null,
      ttftMs,
      finishReason,
      cancelled: !completed,
    });
  }
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
