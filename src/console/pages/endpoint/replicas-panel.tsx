/**
 * The endpoint's replicas, their engine logs and its event history, as three
 * tabs of one panel: **Replicas** (each one's state, version, instance, where
 * it runs, since when and why it ended, and how many failed lately),
 * **Logs** (logs-tab.tsx) and **Event history** (event-history.tsx). The
 * list is read again whenever the page's status subscription reports an
 * event (`generation`), and every few seconds, so it follows replicas
 * starting and stopping.
 */
import { useEffect, useId, useRef, useState, type KeyboardEvent } from 'react';
import { useQuery } from '../../api/hooks.js';
import { EndpointPageReplicasDocument, type EndpointPageReplicasQuery, type EndpointPageSpecFragment } from '../../api/generated.js';
import { ErrorAlert, Loading, StatusBadge } from '../../components/ui.js';
import { formatTime } from '../../format.js';
import { replicaInstance } from './format.js';
import { LogsTab } from './logs-tab.js';
import { EventHistory } from './event-history.js';

const CHANGING_POLL_MS = 2000;
const STEADY_POLL_MS = 10_000;

const TABS = [
  { key: 'replicas', label: 'Replicas' },
  { key: 'logs', label: 'Logs' },
  { key: 'events', label: 'Event history' },
] as const;
type Tab = (typeof TABS)[number]['key'];

export function ReplicasPanel({
  id,
  instanceOption,
  generation,
}: {
  id: string;
  instanceOption: EndpointPageSpecFragment['instanceOption'];
  generation: number;
}) {
  const replicas = useQuery(EndpointPageReplicasDocument, { id });
  const { reload } = replicas;
  useEffect(() => {
    if (generation > 0) reload();
  }, [generation, reload]);
  // A replica changes state without an endpoint event of its own: look again now and then, often while one starts or drains.
  const changing = replicas.data?.endpoint?.replicas.nodes.some((r) => r.state === 'STARTING' || r.state === 'DRAINING') ?? false;
  useEffect(() => {
    const timer = setInterval(reload, changing ? CHANGING_POLL_MS : STEADY_POLL_MS);
    return () => clearInterval(timer);
  }, [changing, reload]);
  const [tab, setTab] = useState<Tab>('replicas');
  const [logReplica, setLogReplica] = useState<string | undefined>();
  const baseId = useId();
  const tabRefs = useRef<Array<HTMLButtonElement | null>>([]);

  const select = (index: number) => {
    const next = TABS[(index + TABS.length) % TABS.length]!;
    setTab(next.key);
    tabRefs.current[TABS.indexOf(next)]?.focus();
  };
  const onKeyDown = (event: KeyboardEvent, index: number) => {
    const moves: Record<string, number> = { ArrowRight: index + 1, ArrowLeft: index - 1, Home: 0, End: TABS.length - 1 };
    const target = moves[event.key];
    if (target === undefined) return;
    event.preventDefault();
    select(target);
  };
  const list = replicas.data?.endpoint?.replicas;

  return (
    <section className="panel replicas-panel" aria-labelledby={`${baseId}-heading`}>
      <h2 id={`${baseId}-heading`}>Replicas and logs</h2>
      <div role="tablist" aria-label="Replicas, logs and event history" className="tabs">
        {TABS.map((t, index) => (
          <button
            key={t.key}
            ref={(element) => void (tabRefs.current[index] = element)}
            type="button"
            role="tab"
            id={`${baseId}-tab-${t.key}`}
            aria-controls={`${baseId}-panel-${t.key}`}
            aria-selected={tab === t.key}
            tabIndex={tab === t.key ? 0 : -1}
            className="tab"
            onClick={() => setTab(t.key)}
            onKeyDown={(event) => onKeyDown(event, index)}
          >
            {t.label}
          </button>
        ))}
      </div>
      <div role="tabpanel" id={`${baseId}-panel-${tab}`} aria-labelledby={`${baseId}-tab-${tab}`} className="tab-panel">
        {tab !== 'events' && replicas.error && <ErrorAlert error={replicas.error} />}
        {tab !== 'events' && !list && !replicas.error && <Loading what="the replicas" />}
        {tab === 'replicas' && list && (
          <ReplicaList
            list={list}
            instanceOption={instanceOption}
            refreshing={replicas.loading}
            onRefresh={reload}
            onShowLog={(replicaId) => {
              setLogReplica(replicaId);
              setTab('logs');
            }}
          />
        )}
        {tab === 'logs' && list && <LogsTab id={id} replicas={list.nodes} selected={logReplica} onSelect={setLogReplica} />}
        {tab === 'events' && <EventHistory id={id} generation={generation} />}
      </div>
    </section>
  );
}

type ReplicaListData = NonNullable<EndpointPageReplicasQuery['endpoint']>['replicas'];

function ReplicaList({
  list,
  instanceOption,
  refreshing,
  onRefresh,
  onShowLog,
}: {
  list: ReplicaListData;
  instanceOption: EndpointPageSpecFragment['instanceOption'];
  refreshing: boolean;
  onRefresh(): void;
  onShowLog(replicaId: string): void;
}) {
  const { nodes, failures } = list;
  return (
    <>
      <div className="actions tab-toolbar">
        <p className="hint">Live replicas first (oldest first), then those that ended in the last day.</p>
        <button type="button" className="secondary" disabled={refreshing} onClick={onRefresh}>
          Refresh replicas
        </button>
      </div>
      <p className="replica-failures" data-testid="replica-failures">
        Failed in the last {Math.round(failures.windowSeconds / 60)} min: <strong>{failures.count}</strong>
        {failures.count > 0 && <span className="muted"> (each was replaced: the endpoint&apos;s restarts)</span>}
        {failures.last && (
          <span className="replica-last-failure">
            {' '}
            — last: <code>{failures.last.id}</code>
            {failures.last.endedAt && <> at {formatTime(failures.last.endedAt)}</>}
            {failures.last.lastError && <>: {failures.last.lastError}</>}
          </span>
        )}
      </p>
      {nodes.length === 0 ? (
        <p className="muted">No replicas yet: the endpoint has not started one (it starts one when it runs or wakes).</p>
      ) : (
        <div className="table-wrap">
          <table className="replicas-table">
            <caption className="visually-hidden">Replicas</caption>
            <thead>
              <tr>
                <th scope="col">Replica</th>
                <th scope="col">State</th>
                <th scope="col">Version</th>
                <th scope="col">Instance</th>
                <th scope="col">Where</th>
                <th scope="col">Since</th>
                <th scope="col">Last error</th>
                <th scope="col">
                  <span className="visually-hidden">Log</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {nodes.map((replica) => (
                <tr key={replica.id} data-replica={replica.id}>
                  <td data-label="Replica">
                    <code>{replica.id}</code>
                  </td>
                  <td data-label="State">
                    <StatusBadge status={replica.state} />
                  </td>
                  <td data-label="Version">{replica.versionIndex}</td>
                  <td data-label="Instance">{replicaInstance(replica, instanceOption)}</td>
                  <td data-label="Where">
                    {replica.node} <span className="muted small">({replica.runtime})</span>
                  </td>
                  <td data-label="Since">
                    <time dateTime={replica.since}>{formatTime(replica.since)}</time>
                  </td>
                  <td data-label="Last error">{replica.lastError ?? '—'}</td>
                  <td>
                    <button type="button" className="secondary" onClick={() => onShowLog(replica.id)} aria-label={`Log of ${replica.id}`}>
                      Log
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </>
  );
}
