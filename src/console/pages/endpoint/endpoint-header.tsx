/** The endpoint page's header: name, id, live status, phase, replicas, failure and download progress, and its links. */
import { Link } from 'wouter';
import type { EndpointPageStatusFieldsFragment } from '../../api/generated.js';
import { StatusBadge } from '../../components/ui.js';
import { DownloadProgressBar } from './download-progress.js';
import { humanize } from './format.js';

export function EndpointHeader({
  endpoint,
  status,
  connected,
}: {
  endpoint: { id: string; name: string; project: { name: string } };
  status: EndpointPageStatusFieldsFragment;
  connected: boolean;
}) {
  return (
    <header className="endpoint-header panel">
      <div className="endpoint-title">
        <h1>{endpoint.name}</h1>
        <div className="endpoint-links actions">
          <Link href={`/endpoints/${endpoint.id}/edit`} className="button secondary">
            Edit
          </Link>
          <Link href={`/playground/${endpoint.id}`} className="button secondary">
            Open in playground
          </Link>
        </div>
      </div>
      <dl className="endpoint-facts">
        <div>
          <dt>ID</dt>
          <dd>
            <code>{endpoint.id}</code>
          </dd>
        </div>
        <div>
          <dt>Project</dt>
          <dd>{endpoint.project.name}</dd>
        </div>
        <div>
          <dt>Status</dt>
          <dd aria-live="polite" data-testid="endpoint-status">
            <StatusBadge status={status.status} />
            {!connected && <span className="muted small"> (not live)</span>}
          </dd>
        </div>
        <div>
          <dt>Phase</dt>
          <dd>{status.phase ? humanize(status.phase) : '—'}</dd>
        </div>
        <div>
          <dt>Replicas</dt>
          <dd>
            <span aria-label={`${status.currReplicaCnt} current, ${status.desiredReplicaCnt} desired, ${status.updatedReplicaCnt} updated`}>
              {status.currReplicaCnt} / {status.desiredReplicaCnt} / {status.updatedReplicaCnt}
            </span>{' '}
            <span className="muted small">current / desired / updated</span>
          </dd>
        </div>
      </dl>
      {status.errorCode && (
        <div className="alert alert-error endpoint-failure" role="alert">
          <code>{status.errorCode}</code>
          {status.errorMessage && <span> — {status.errorMessage}</span>}
        </div>
      )}
      {status.phase === 'REQUESTING_VIRTUAL_MACHINE' && status.waitReason && (
        <p className="muted endpoint-wait" role="status">
          {status.waitReason}
        </p>
      )}
      {status.phase === 'DOWNLOADING_MODEL' && status.downloadProgress && (
        <DownloadProgressBar label="Model download" progress={status.downloadProgress} />
      )}
    </header>
  );
}
