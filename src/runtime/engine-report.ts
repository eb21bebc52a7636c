/**
 * What an engine (or the model fetcher) reports when it cannot start: one
 * `ENGINE_ERROR {"code","message"}` line in its output, which the local
 * runtime finds in the replica's log and the Kubernetes runtime in the pod's
 * termination message. A code that is not an endpoint error code is reported
 * as INFERENCE_ENGINE_UNKNOWN_ERROR. The message is the engine's words (it
 * may echo a model's own text): its control characters go (the database
 * refuses a NUL in text, and the failure would never be recorded).
 */
import { ENDPOINT_ERROR_CODES, type EndpointErrorCode } from '../domain/lifecycle.js';

const ENGINE_ERROR_LINE = /^ENGINE_ERROR (\{.*\})$/m;

/** The code and message of the ENGINE_ERROR line in `text` (message undefined when it gave none); undefined without a readable line. */
export function reportedError(text: string | undefined): { code: EndpointErrorCode; message: string | undefined } | undefined {
  const match = text ? ENGINE_ERROR_LINE.exec(text) : null;
  if (!match) return undefined;
  try {
    const reported = JSON.parse(match[1]!) as { code?: unknown; message?: unknown };
    const code = ENDPOINT_ERROR_CODES.includes(reported.code as EndpointErrorCode)
      ? (reported.code as EndpointErrorCode)
      : 'INFERENCE_ENGINE_UNKNOWN_ERROR';
    return { code, message: typeof reported.message === 'string' ? printable(reported.message) : undefined };
  } catch {
    return undefined;
  }
}

/** `text` without its control characters (line breaks and tabs kept). */
// eslint-disable-next-line no-control-regex
const printable = (text: string) => text.replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/g, '');
