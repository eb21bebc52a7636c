/** The endpoint picker: which endpoint the playground talks to, its live status and what that means for sending. */
import { useId } from 'react';
import { Link, useLocation } from 'wouter';
import { useSubscription } from '../../api/hooks.js';
import { PlaygroundStatusDocument } from '../../api/generated.js';
import { ErrorAlert, Loading, StatusBadge } from '../../components/ui.js';
import { useSession } from '../../session.js';
import type { EndpointChoice } from './chat-model.js';
import type { EndpointChoices } from './use-endpoint-choices.js';

/** What the endpoint's status means for a message sent now. */
function statusHint(status: string): string | undefined {
  switch (status) {
    case 'RUNNING':
    case 'READY':
      return undefined;
    case 'SLEEPING':
      return 'The endpoint is asleep: sending a message wakes it, and the answer waits until it has started.';
    case 'AWAKING':
    case 'INITIALIZING':
    case 'UPDATING':
      return 'The endpoint is starting: the answer waits until it serves.';
    case 'FAILED':
    case 'TERMINATED':
    case 'TERMINATING':
    case 'STOPPING':
      return 'The endpoint does not serve requests now; restart or wake it from its page.';
    default:
      return undefined;
  }
}

/** The picked endpoint's live status, and what it means for sending. */
function EndpointStatusLine({ endpoint, onStatus }: { endpoint: EndpointChoice; onStatus(status: string): void }) {
  const status = endpoint.status;
  const { connected } = useSubscription(PlaygroundStatusDocument, { endpointId: endpoint.id }, (value) =>
    onStatus(value.endpointStatus.status.status),
  );
  const hint = statusHint(status);
  return (
    <div className="endpoint-status">
      <p>
        Status: <StatusBadge status={status} />
        {/* As on the endpoint's page: a status that stopped following the endpoint says so. */}
        {!connected && <span className="muted small"> (not live)</span>} <Link href={`/endpoints/${endpoint.id}`}>Endpoint page</Link>
      </p>
      {hint && <p className="hint">{hint}</p>}
    </div>
  );
}

export function EndpointPicker({ choices }: { choices: EndpointChoices }) {
  const { team } = useSession();
  const { id, list, single, endpoints, selected, unknownId, setStatus } = choices;
  const [, navigate] = useLocation();
  const selectId = useId();
  return (
    <div className="panel endpoint-picker">
      {list.loading && !list.data ? (
        <Loading what="the endpoints" />
      ) : (
        <div className="field">
          <label htmlFor={`${selectId}-endpoint`}>Endpoint</label>
          <select
            id={`${selectId}-endpoint`}
            value={selected?.id ?? ''}
            onChange={(e) => navigate(e.target.value ? `/playground/${e.target.value}` : '/playground')}
          >
            <option value="">{endpoints.length ? 'Pick an endpoint…' : 'No endpoints in this team'}</option>
            {endpoints.map((e) => (
              <option key={e.id} value={e.id}>
                {e.name} ({e.projectName}) — {e.status}
              </option>
            ))}
          </select>
        </div>
      )}
      {unknownId && <ErrorAlert error={single.error ?? `No endpoint ${id} in your teams.`} />}
      {selected && <EndpointStatusLine key={selected.id} endpoint={selected} onStatus={(status) => setStatus(selected.id, status)} />}
      {!list.loading && endpoints.length === 0 && team && (
        <p>
          <Link href="/endpoints/new">Create an endpoint</Link> to talk to it here.
        </p>
      )}
    </div>
  );
}
