/**
 * One endpoint (#/endpoints/:id): its header with the live status, the
 * lifecycle actions, its replicas with their logs and the event history, the spec, the version history, the live event timeline,
 * the metrics and the request activity. The status comes from the
 * `endpointStatus` subscription, so every section follows it without reload.
 */
import { useCallback, useState } from 'react';
import { Link } from 'wouter';
import { useQuery, useSubscription } from '../../api/hooks.js';
import {
  EndpointPageEndpointDocument,
  EndpointPageStatusDocument,
  type EndpointPageStatusFieldsFragment,
  type EndpointPageStatusSubscription,
} from '../../api/generated.js';
import { ErrorAlert, Loading, Notice } from '../../components/ui.js';
import { EndpointHeader } from './endpoint-header.js';
import { LifecycleActions } from './lifecycle-actions.js';
import { SpecPanel } from './spec-panel.js';
import { VersionsPanel } from './versions-panel.js';
import { EventTimeline, addTimelineEntry, type TimelineEntry } from './event-timeline.js';
import { MetricsPanel } from './metrics-panel.js';
import { RequestsPanel } from './requests-panel.js';
import { ReplicasPanel } from './replicas-panel.js';
import './endpoint-page.css';

/** Keyed by the id: moving to another endpoint starts its live state afresh. */
export function EndpointPage({ id }: { id: string }) {
  return <EndpointView key={id} id={id} />;
}

function EndpointView({ id }: { id: string }) {
  const endpoint = useQuery(EndpointPageEndpointDocument, { id });
  const reloadEndpoint = endpoint.reload;
  const [live, setLive] = useState<EndpointPageStatusFieldsFragment | undefined>();
  const [timeline, setTimeline] = useState<TimelineEntry[]>([]);
  const [versionsGeneration, setVersionsGeneration] = useState(0);
  const [eventsGeneration, setEventsGeneration] = useState(0);
  const [deleted, setDeleted] = useState(false);

  const onStatus = useCallback(
    ({ endpointStatus: update }: EndpointPageStatusSubscription) => {
      setLive(update.status);
      setTimeline((entries) => addTimelineEntry(entries, update));
      // Any event may mean replicas started or stopped, and adds to the event history.
      if (update.event) setEventsGeneration((g) => g + 1);
      // A new version changes the spec; a status change may mark a version rolled out.
      if (update.event?.type === 'VERSION_ADDED') reloadEndpoint();
      if (update.event?.type === 'VERSION_ADDED' || update.event?.type === 'STATUS_CHANGED') setVersionsGeneration((g) => g + 1);
      if (update.event?.type === 'DELETED') setDeleted(true);
    },
    [reloadEndpoint],
  );
  const subscription = useSubscription(EndpointPageStatusDocument, { endpointId: id }, onStatus, {
    skip: !endpoint.data?.endpoint || deleted,
  });
  const refreshVersions = useCallback(() => setVersionsGeneration((g) => g + 1), []);

  if (endpoint.error && !endpoint.data) return <ErrorAlert error={endpoint.error} />;
  if (!endpoint.data) return <Loading what="the endpoint" />;
  const data = endpoint.data.endpoint;
  if (!data) {
    return (
      <>
        <h1>Endpoint not found</h1>
        <p>
          No endpoint <code>{id}</code> is visible to you. <Link href="/">Back to the endpoints</Link>.
        </p>
      </>
    );
  }
  const status = live ?? data.status;

  return (
    <div className="endpoint-page">
      <EndpointHeader endpoint={data} status={status} connected={subscription.connected} />
      {deleted && <Notice>This endpoint was deleted.</Notice>}
      <ErrorAlert error={subscription.error} />
      <LifecycleActions id={id} name={data.name} status={status.status} onChanged={reloadEndpoint} />
      <ReplicasPanel id={id} instanceOption={data.spec.instanceOption} generation={eventsGeneration} />
      <SpecPanel spec={data.spec} />
      <VersionsPanel
        id={id}
        status={status.status}
        currentVersion={data.currentVersion.versionIndex}
        generation={versionsGeneration}
        onRolledBack={refreshVersions}
      />
      <EventTimeline entries={timeline} />
      <MetricsPanel id={id} />
      <RequestsPanel id={id} />
    </div>
  );
}
