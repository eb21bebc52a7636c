/**
 * What a failed hub answer means, told apart as `huggingface_hub`'s `hf_raise_for_status` does: by status plus the
 * `X-Error-Code` / `X-Error-Message` headers, each mapped to a ModelSourceError (a TransientError where a retry may
 * help).
 */
import { ModelSourceError, serverText } from './errors.js';
import { isTransientStatus, retryAfterMs, TransientError } from './retry.js';

/** What a hub call was reading, for its messages. */
export interface HubContext {
  repo: string;
  revision?: string;
  file?: string;
  tokenSent: boolean;
}

export const API_ERROR = 'WORKLOAD_INIT_HF_WANDB_API_ERROR';
export const NO_ACCESS = 'WORKLOAD_INIT_CANNOT_ACCESS_REPO_ERROR';
const INVALID_CREDENTIALS = 'Invalid credentials in Authorization header';

/** The message the hub sends with a 401 for a token it does not know (`hf_raise_for_status` keys on it). */
export const HUB_INVALID_CREDENTIALS = INVALID_CREDENTIALS;
/** The message the hub sends for a repository disabled by its owners or the hub (`DisabledRepoError`). */
export const HUB_DISABLED_REPO = 'Access to this resource is disabled.';

/**
 * Maps a failed hub answer to a ModelSourceError in the order `huggingface_hub`'s `hf_raise_for_status` uses:
 * the `X-Error-Code` header first (RevisionNotFound, EntryNotFound, GatedRepo), then `X-Error-Message` (a disabled
 * repo), then RepoNotFound, or a 401 whose message is not "Invalid credentials in Authorization header" (the hub
 * answers 401 to anonymous callers for private, gated and missing repos alike), then the status: 400, 403, 429,
 * and the rest. So a 401 is the token's fault only when the hub says the credentials are invalid, and a 401 with
 * RepoNotFound is a repository that is missing or not readable with this token. 429 and 5xx come back as
 * TransientError (with the Retry-After), which the callers retry.
 */
export function hubResponseError(res: Response, ctx: HubContext): ModelSourceError {
  void res.body?.cancel().catch(() => {}); // free the connection; the body adds nothing the headers don't say
  const errorCode = res.headers.get('x-error-code');
  const hubMessage = serverText(res.headers.get('x-error-message'));
  const { repo, revision, file } = ctx;
  const status = res.status;

  if (errorCode === 'RevisionNotFound') {
    return new ModelSourceError(NO_ACCESS, `Revision "${revision ?? 'main'}" was not found in ${repo} (${status} RevisionNotFound).`);
  }
  if (errorCode === 'EntryNotFound') {
    return new ModelSourceError(
      'WORKLOAD_INIT_MANIFEST_NOT_FOUND_ERROR',
      `${file ?? 'The requested path'} was not found in ${repo} at revision ${revision ?? 'main'} (${status} EntryNotFound).`,
    );
  }
  if (errorCode === 'GatedRepo') {
    return new ModelSourceError(
      NO_ACCESS,
      ctx.tokenSent
        ? `${repo} is a gated repository and the token's account has not been granted access (${status} GatedRepo). Request access on the hub's page for ${repo}.`
        : `${repo} is a gated repository (${status} GatedRepo): provide an access token of an account that has been granted access.`,
    );
  }
  if (hubMessage === HUB_DISABLED_REPO) {
    return new ModelSourceError(NO_ACCESS, `Access to ${repo} is disabled on the hub (${status}).`);
  }
  if (errorCode === 'RepoNotFound' || (status === 401 && hubMessage !== INVALID_CREDENTIALS)) {
    return new ModelSourceError(
      NO_ACCESS,
      ctx.tokenSent
        ? `Repository ${repo} was not found, or it is private and the token has no access to it (${status}).`
        : `Repository ${repo} was not found, or it is private or gated (${status}) and no token was sent.`,
    );
  }
  if (status === 401) {
    return new ModelSourceError(
      'WORKLOAD_INIT_INVALID_TOKEN_ERROR',
      ctx.tokenSent
        ? `The hub rejected the access token (401: ${INVALID_CREDENTIALS}) while reading ${repo}. Check that the token is valid and not expired.`
        : `The hub rejected the request's credentials (401: ${INVALID_CREDENTIALS}) while reading ${repo}.`,
    );
  }
  if (status === 400) {
    return new ModelSourceError(
      API_ERROR,
      `The hub refused the request for ${repo} as malformed (400${hubMessage ? `: ${hubMessage}` : ''}).`,
    );
  }
  if (status === 403 || status === 404) {
    return new ModelSourceError(NO_ACCESS, `The hub denied access to ${repo} (${status}${hubMessage ? `: ${hubMessage}` : ''}).`);
  }
  if (status === 429) {
    return new TransientError(API_ERROR, `The hub is rate-limiting requests (429) for ${repo}.`, retryAfterMs(res));
  }
  const message = `The hub answered ${status} while reading ${repo}${file ? `/${file}` : ''}.`;
  return isTransientStatus(status) ? new TransientError(API_ERROR, message, retryAfterMs(res)) : new ModelSourceError(API_ERROR, message);
}

/** An answer of the hub that does not have the expected shape. */
export function unparseable(ctx: HubContext, what: string): ModelSourceError {
  return new ModelSourceError(API_ERROR, `The hub sent an unexpected ${what} for ${ctx.repo}.`);
}
