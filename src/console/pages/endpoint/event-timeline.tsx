/**
 * The live event timeline: what the `endpointStatus` subscription reported
 * since the page opened, newest first (at most MAX_ENTRIES), with the model
 * download's progress while it lasts.
 */
import type { EndpointPageStatusSubscription } from '../../api/generated.js';
import { StatusBadge } from '../../components/ui.js';
import { DownloadProgressBar } from './download-progress.js';
import { formatClock, formatTime } from '../../format.js';
import { humanize } from './format.js';

export const MAX_ENTRIES = 200;

type Update = EndpointPageStatusSubscription['endpointStatus'];
type EventFields = NonNullable<Update['event']>;

export interface TimelineEntry {
  key: string;
  at: string;
  type: string;
  status: string | null;
  phase: string | null;
  errorCode: string | null;
  message: string | null;
  cause: string | null;
  versionIndex: number | null;
  replicas: string | null;
  download: { bytesDone: number; bytesTotal: number } | null;
}

let counter = 0;

/** A recorded event as a timeline entry (the live timeline's and the event history's). */
export function entryOfEvent(event: EventFields): TimelineEntry {
  const replicas = event.replicas
    ? `${event.replicas.currReplicaCnt} current / ${event.replicas.desiredReplicaCnt} desired / ${event.replicas.updatedReplicaCnt} updated`
    : null;
  return {
    key: `event-${event.id}`,
    at: event.createdAt,
    type: humanize(event.type),
    status: event.status,
    phase: event.phase,
    errorCode: event.errorCode,
    message: event.message,
    cause: event.cause,
    versionIndex: event.versionIndex,
    replicas,
    download: null,
  };
}

/** The entries with the update added on top: an event, the current status (the first update), or download progress (replacing the previous progress entry). */
export function addTimelineEntry(entries: TimelineEntry[], update: Update): TimelineEntry[] {
  const { event, status } = update;
  if (event) {
    const entry = entryOfEvent(event);
    if (entries.some((e) => e.key === entry.key)) return entries;
    return [entry, ...entries].slice(0, MAX_ENTRIES);
  }
  const downloading = status.phase === 'DOWNLOADING_MODEL' && status.downloadProgress;
  const entry: TimelineEntry = {
    key: `status-${++counter}`,
    at: status.updatedAt,
    type: downloading ? 'Downloading the model' : 'Current status',
    status: status.status,
    phase: status.phase,
    errorCode: status.errorCode,
    message: status.errorMessage,
    cause: null,
    versionIndex: null,
    replicas: null,
    download: downloading ? status.downloadProgress : null,
  };
  const rest = downloading && entries[0]?.download ? entries.slice(1) : entries;
  return [entry, ...rest].slice(0, MAX_ENTRIES);
}

export function EventTimeline({ entries }: { entries: TimelineEntry[] }) {
  return (
    <section className="panel" aria-labelledby="timeline-heading">
      <h2 id="timeline-heading">Events</h2>
      <p className="hint">Live since this page opened, newest first.</p>
      {entries.length === 0 ? (
        <p className="muted">Waiting for events…</p>
      ) : (
        <TimelineList entries={entries} label="Endpoint events" live />
      )}
    </section>
  );
}

/** Timeline entries, newest first; `live` announces the ones added. */
export function TimelineList({ entries, label, live = false }: { entries: TimelineEntry[]; label: string; live?: boolean }) {
  return (
    <ol className="timeline" aria-label={label} {...(live ? { 'aria-live': 'polite', 'aria-relevant': 'additions' } : {})}>
      {entries.map((entry) => (
        <li key={entry.key} className="timeline-entry">
          <div className="timeline-head">
            <time dateTime={entry.at}>{live ? formatClock(entry.at) : formatTime(entry.at)}</time>
            <strong className="timeline-type">{entry.type}</strong>
            {entry.status && <StatusBadge status={entry.status} />}
            {entry.phase && <span className="muted">{humanize(entry.phase)}</span>}
            {entry.versionIndex !== null && <span>version {entry.versionIndex}</span>}
          </div>
          {entry.errorCode && (
            <p className="timeline-error">
              <code>{entry.errorCode}</code>
              {entry.message && <span> — {entry.message}</span>}
            </p>
          )}
          {!entry.errorCode && entry.message && <p className="timeline-message">{entry.message}</p>}
          {entry.replicas && <p className="timeline-message">Replicas: {entry.replicas}</p>}
          {entry.cause && <p className="muted small">{entry.cause}</p>}
          {entry.download && <DownloadProgressBar label="Downloaded" progress={entry.download} />}
        </li>
      ))}
    </ol>
  );
}
