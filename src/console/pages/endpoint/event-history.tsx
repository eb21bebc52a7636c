/**
 * The Event history tab: the endpoint's recorded events, newest first, a page
 * at a time (`Endpoint.events(newestFirst: true, first, after)`): everything
 * since its creation, where the live timeline shows only what happened since
 * the page opened. It reads the first page again when the page's status
 * subscription reports an event (`generation`).
 */
import { useCallback, useEffect, useRef, useState } from 'react';
import { ApiError } from '../../api/graphql.js';
import { EndpointPageEventHistoryDocument } from '../../api/generated.js';
import { ErrorAlert, Loading } from '../../components/ui.js';
import { useSession } from '../../session.js';
import { entryOfEvent, TimelineList, type TimelineEntry } from './event-timeline.js';

const PAGE_SIZE = 20;

export function EventHistory({ id, generation }: { id: string; generation: number }) {
  const { api } = useSession();
  const [entries, setEntries] = useState<TimelineEntry[] | undefined>();
  const [page, setPage] = useState<{ endCursor: string | null; hasNextPage: boolean }>({ endCursor: null, hasNextPage: false });
  const [loading, setLoading] = useState(false);
  const [error, setError] = useState<ApiError | undefined>();
  const pagedOlder = useRef(false);

  const load = useCallback(
    async (after: string | null, isCancelled: () => boolean = () => false) => {
      setLoading(true);
      try {
        const result = await api.request(EndpointPageEventHistoryDocument, { id, first: PAGE_SIZE, after });
        const connection = result.endpoint?.events;
        if (!connection || isCancelled()) return;
        const loaded = connection.nodes.map(entryOfEvent);
        const keys = new Set(loaded.map((e) => e.key));
        // Reading the first page again adds the new events on top and keeps the older pages already shown.
        setEntries((previous = []) => (after ? [...previous, ...loaded] : [...loaded, ...previous.filter((e) => !keys.has(e.key))]));
        if (after) pagedOlder.current = true;
        if (after || !pagedOlder.current) setPage(connection.pageInfo);
        setError(undefined);
      } catch (failure) {
        if (!isCancelled()) setError(failure instanceof ApiError ? failure : new ApiError(String(failure)));
      } finally {
        if (!isCancelled()) setLoading(false);
      }
    },
    [api, id],
  );

  useEffect(() => {
    let cancelled = false;
    void load(null, () => cancelled);
    return () => {
      cancelled = true;
    };
  }, [load, generation]);

  return (
    <>
      <p className="hint">Everything recorded since the endpoint was created, newest first.</p>
      <ErrorAlert error={error} />
      {entries === undefined && !error && <Loading what="the event history" />}
      {entries?.length === 0 && <p className="muted">No events recorded.</p>}
      {entries && entries.length > 0 && <TimelineList entries={entries} label="Event history" />}
      {page.hasNextPage && (
        <button type="button" className="secondary" disabled={loading} onClick={() => void load(page.endCursor)}>
          Load older events
        </button>
      )}
    </>
  );
}
