/**
 * A JSON answer of a hub or registry, read within bounds: a hostile or broken server cannot make the
 * gateway hold an endless answer (or a gzip bomb: the bytes are counted after decompression), nor keep
 * a model's preparation waiting on an answer that drips in a byte at a time.
 */
export interface TextLimits {
  /** Bytes of text kept; past them the answer is dropped (undefined). */
  maxBytes: number;
  /** Milliseconds for the whole body, from its head. */
  timeoutMs: number;
}

/**
 * What one answer of a hub or registry may be (model info, a page of a file list, a W&B GraphQL answer or manifest):
 * theirs are kilobytes to a few megabytes, sent at once.
 */
export const ANSWER_LIMITS: TextLimits = { maxBytes: 32 << 20, timeoutMs: 60_000 };

/** The body arrived too slowly (TextLimits.timeoutMs). */
export class BodyTimeoutError extends Error {}

/** The body as UTF-8 text; undefined past `maxBytes`; rejects with BodyTimeoutError past `timeoutMs`. */
export async function readTextWithin(res: Response, limits: TextLimits): Promise<string | undefined> {
  if (!res.body) return '';
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new BodyTimeoutError(`the answer took longer than ${limits.timeoutMs} ms`)), limits.timeoutMs);
  });
  try {
    for (;;) {
      const { done, value } = await Promise.race([reader.read(), late]);
      if (done) return Buffer.concat(chunks).toString('utf8');
      size += value.byteLength;
      if (size > limits.maxBytes) {
        void reader.cancel().catch(() => {});
        return undefined;
      }
      chunks.push(value);
    }
  } catch (error) {
    void reader.cancel().catch(() => {});
    throw error;
  } finally {
    clearTimeout(timer);
  }
}
