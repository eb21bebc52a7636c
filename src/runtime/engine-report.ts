/**
 * What an engine (or the model fetcher) reports when it cannot start: one
 * `ENGINE_ERROR {"code","message"}` line in its output, which the local
 * runtime finds in the replica's log and the Kubernetes runtime in the pod's
 * termination message. A code that is not an endpoint error code is reported
 * as INFERENCE_ENGINE_UNKNOWN_ERROR.
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
    return { code, message: typeof reported.message === 'string' ? reported.message : undefined };
  } catch {
    return undefined;
  }
}
