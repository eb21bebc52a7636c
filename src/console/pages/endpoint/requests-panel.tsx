/** The endpoint's request activity, newest first, paginated, optionally only the failed ones. */
import { useCallback, useEffect, useId, useState } from 'react';
import { ApiError } from '../../api/graphql.js';
import { EndpointPageRequestsDocument, type EndpointPageRequestsQuery } from '../../api/generated.js';
import { ErrorAlert, Loading } from '../../components/ui.js';
import { useSession } from '../../session.js';
import { formatTime } from '../../format.js';
import { formatMs } from './format.js';

const PAGE_SIZE = 20;

type Request = NonNullable<EndpointPageRequestsQuery['endpoint']>['requests']['nodes'][number];

function outcomeOf(request: Request): string {
  if (request.cancelled) return 'cancelled';
  if (request.errorCode) return request.errorCode;
  if (request.status >= 400) return 'refused';
  return request.finishReason ?? 'ok';
}

export function RequestsPanel({ id }: { id: string }) {
  const { api } = useSession();
  const [errorsOnly, setErrorsOnly] = useState(false);
  const [requests, setRequests] = useState<Request[]>([]);
  const [page, setPage] = useState<{ endCursor: string | null; hasNextPage: boolean }>({ endCursor: null, hasNextPage: false });
  const [loading, setLoading] = useState(true);
  const [loaded, setLoaded] = useState(false);
  const [error, setError] = useState<ApiError | undefined>();
  const filterId = useId();

  const load = useCallback(
    async (after: string | null) => {
      setLoading(true);
      try {
        const result = await api.request(EndpointPageRequestsDocument, {
          id,
          first: PAGE_SIZE,
          after,
          filter: errorsOnly ? { errorsOnly: true } : null,
        });
        const connection = result.endpoint?.requests;
        if (!connection) return;
        setRequests((previous) => (after ? [...previous, ...connection.nodes] : connection.nodes));
        setPage(connection.pageInfo);
        setError(undefined);
        setLoaded(true);
      } catch (failure) {
        setError(failure instanceof ApiError ? failure : new ApiError(String(failure)));
      } finally {
        setLoading(false);
      }
    },
    [api, id, errorsOnly],
  );

  useEffect(() => {
    void load(null);
  }, [load]);

  return (
    <section className="panel" aria-labelledby="requests-heading">
      <h2 id="requests-heading">Request activity</h2>
      <div className="actions requests-toolbar">
        <label htmlFor={filterId} className="checkbox">
          <input id={filterId} type="checkbox" checked={errorsOnly} onChange={(e) => setErrorsOnly(e.target.checked)} /> Failed requests
          only
        </label>
        <button type="button" className="secondary" disabled={loading} onClick={() => void load(null)}>
          Refresh requests
        </button>
      </div>
      <ErrorAlert error={error} />
      {!loaded && loading && <Loading what="the requests" />}
      {loaded && requests.length === 0 && <p className="muted">No requests{errorsOnly ? ' failed' : ''} yet.</p>}
      {requests.length > 0 && (
        <div className="table-wrap">
          <table className="requests-table">
            <caption className="visually-hidden">Requests, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Time</th>
                <th scope="col">Status</th>
                <th scope="col">Tokens in / out</th>
                <th scope="col">Latency (TTFT)</th>
                <th scope="col">Key of</th>
              </tr>
            </thead>
            <tbody>
              {requests.map((request) => (
                <tr key={request.id}>
                  <td>
                    <time dateTime={request.startedAt}>{formatTime(request.startedAt)}</time>
                  </td>
                  <td>
                    <span className={request.status >= 400 || request.errorCode ? 'text-bad' : undefined}>{request.status}</span>{' '}
                    <span className="muted small">{outcomeOf(request)}</span>
                    {request.stream && <span className="muted small"> · stream</span>}
                  </td>
                  <td>
                    {request.promptTokens ?? '—'} / {request.completionTokens ?? '—'}
                  </td>
                  <td>
                    {formatMs(request.latencyMs)} <span className="muted small">({formatMs(request.ttftMs)})</span>
                  </td>
                  <td>{request.user ? request.user.name || request.user.email : '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {page.hasNextPage && (
        <button type="button" className="secondary" disabled={loading} onClick={() => void load(page.endCursor)}>
          Load older requests
        </button>
      )}
    </section>
  );
}
