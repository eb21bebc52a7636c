/**
 * The Logs tab: one replica's engine log (docs/logs-and-events.md). Its last
 * lines come from `Endpoint.logs`; **Follow** subscribes to `replicaLogs`
 * instead (the last lines first, then each new batch as the engine writes
 * it), and stops when it is switched off, when another replica or length is
 * chosen, or when the page goes (the subscription ends with its component).
 * A log that cannot be read shows the server's reason; a replica that ended
 * says so, with a way to the endpoint's live replica.
 */
import { useCallback, useEffect, useLayoutEffect, useRef, useState } from 'react';
import { useQuery, useSubscription } from '../../api/hooks.js';
import { EndpointPageLogDocument, EndpointPageLogFollowDocument, type EndpointPageLogFollowSubscription } from '../../api/generated.js';
import { ErrorAlert, Loading, SelectField } from '../../components/ui.js';
import { formatTime } from '../../format.js';
import { isLive, type Replica } from './format.js';

const TAILS = [20, 100, 500, 1000];
/** The most lines a followed log keeps on the page (the oldest go first). */
export const MAX_FOLLOWED_LINES = 5000;

/** The replica whose log the tab opens with: a READY one, else another live one, else the one that ended last. */
function defaultReplica(replicas: readonly Replica[]): Replica | undefined {
  return replicas.find((r) => r.state === 'READY') ?? replicas.find(isLive) ?? replicas[0];
}

export function LogsTab({
  id,
  replicas,
  selected,
  onSelect,
}: {
  id: string;
  replicas: readonly Replica[];
  selected: string | undefined;
  onSelect(replicaId: string): void;
}) {
  const [tail, setTail] = useState(100);
  const [follow, setFollow] = useState(false);
  const fallback = defaultReplica(replicas)?.id;
  // The first choice is kept: a replica that ends stays shown (and says so) rather than the log switching under the reader.
  useEffect(() => {
    if (!selected && fallback) onSelect(fallback);
  }, [selected, fallback, onSelect]);
  const replicaId = selected ?? fallback;

  if (replicas.length === 0 || !replicaId) {
    return <p className="muted">No replicas yet, so no engine log: the endpoint has not started a replica.</p>;
  }
  const replica = replicas.find((r) => r.id === replicaId);
  const liveOther = replicas.find((r) => r.id !== replicaId && isLive(r));

  return (
    <div className="logs-tab">
      <div className="log-controls">
        <SelectField label="Replica" value={replicaId} onChange={(e) => onSelect(e.target.value)}>
          {replica === undefined && <option value={replicaId}>{replicaId}</option>}
          {replicas.map((r) => (
            <option key={r.id} value={r.id}>
              {r.id} — {r.state}
            </option>
          ))}
        </SelectField>
        <SelectField label="Lines" value={String(tail)} onChange={(e) => setTail(Number(e.target.value))}>
          {TAILS.map((n) => (
            <option key={n} value={n}>
              Last {n}
            </option>
          ))}
        </SelectField>
        <label className="checkbox log-follow">
          <input type="checkbox" checked={follow} onChange={(e) => setFollow(e.target.checked)} /> Follow
        </label>
      </div>
      {replica && !isLive(replica) && (
        <div className="alert alert-info replica-ended" role="status">
          Replica <code>{replica.id}</code> is {replica.state.toLowerCase()}
          {replica.endedAt && <> since {formatTime(replica.endedAt)}</>}
          {replica.lastError && <> ({replica.lastError})</>}: its log will not grow.
          {liveOther && (
            <>
              {' '}
              <button type="button" className="secondary" onClick={() => onSelect(liveOther.id)}>
                Show {liveOther.id} ({liveOther.state})
              </button>
            </>
          )}
        </div>
      )}
      {follow ? (
        <FollowedLog key={`${replicaId}:${tail}`} id={id} replicaId={replicaId} tail={tail} />
      ) : (
        <LastLines id={id} replicaId={replicaId} tail={tail} />
      )}
    </div>
  );
}

function LastLines({ id, replicaId, tail }: { id: string; replicaId: string; tail: number }) {
  const log = useQuery(EndpointPageLogDocument, { id, replicaId, tail });
  // A previous replica's lines are not shown as this one's while its own load.
  const lines = log.data?.endpoint?.logs.replicaId === replicaId ? log.data.endpoint.logs.lines : undefined;
  return (
    <>
      <div className="actions tab-toolbar">
        <p className="hint">
          The last {tail} lines of <code>{replicaId}</code>&apos;s engine log. Switch on Follow to see new lines as they come.
        </p>
        <button type="button" className="secondary" disabled={log.loading} onClick={log.reload}>
          Refresh log
        </button>
      </div>
      {log.error && <ErrorAlert error={`The log cannot be shown: ${log.error.message}`} />}
      {!log.error && lines === undefined && <Loading what="the log" />}
      {!log.error && lines !== undefined && <LogLines replicaId={replicaId} lines={lines} />}
    </>
  );
}

function FollowedLog({ id, replicaId, tail }: { id: string; replicaId: string; tail: number }) {
  const [lines, setLines] = useState<string[] | undefined>();
  const onData = useCallback(({ replicaLogs }: EndpointPageLogFollowSubscription) => {
    setLines((previous) => [...(previous ?? []), ...replicaLogs.lines].slice(-MAX_FOLLOWED_LINES));
  }, []);
  const subscription = useSubscription(EndpointPageLogFollowDocument, { endpointId: id, replicaId, tail }, onData);
  return (
    <>
      <p className="hint log-follow-state" role="status">
        {subscription.error
          ? 'Not following.'
          : subscription.completed
            ? 'The log ended (its replica is gone): no more lines will come.'
            : `Following ${replicaId}: new lines appear as the engine writes them.`}
      </p>
      {subscription.error && <ErrorAlert error={`The log cannot be followed: ${subscription.error.message}`} />}
      {!subscription.error && <LogLines replicaId={replicaId} lines={lines ?? []} />}
    </>
  );
}

/** The lines, kept scrolled to the end while the reader is there. */
function LogLines({ replicaId, lines }: { replicaId: string; lines: readonly string[] }) {
  const ref = useRef<HTMLPreElement>(null);
  const atEnd = useRef(true);
  useLayoutEffect(() => {
    const element = ref.current;
    if (element && atEnd.current) element.scrollTop = element.scrollHeight;
  }, [lines]);
  return (
    <pre
      ref={ref}
      className="log-lines"
      role="log"
      aria-label={`Engine log of ${replicaId}`}
      tabIndex={0}
      onScroll={(event) => {
        const element = event.currentTarget;
        atEnd.current = element.scrollHeight - element.scrollTop - element.clientHeight < 24;
      }}
    >
      {lines.length === 0 ? <span className="muted">No lines yet.</span> : lines.join('\n')}
    </pre>
  );
}
