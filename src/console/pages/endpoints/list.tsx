/**
 * The endpoints of the team's projects, one table per project, paged with
 * "Load more". Each project's event subscription keeps the status badges and
 * replica counts live; a new endpoint re-reads the list, a deleted one leaves it.
 */
import { useCallback, useEffect, useRef, useState, type FormEvent } from 'react';
import { Link } from 'wouter';
import { failureOf } from '../../api/graphql.js';
import { useMutation, useSubscription } from '../../api/hooks.js';
import {
  EndpointsCreateProjectDocument,
  EndpointsEventsDocument,
  EndpointsListDocument,
  type EndpointsEventsSubscription,
  type EndpointsRowFragment,
} from '../../api/generated.js';
import { ApiError } from '../../api/graphql.js';
import { ErrorAlert, Field, Loading, Notice, StatusBadge } from '../../components/ui.js';
import { useSession } from '../../session.js';
import './endpoints.css';

const PAGE_SIZE = 20;

type Row = EndpointsRowFragment;
type LiveEvent = EndpointsEventsSubscription['endpointEvents'];

/** What the events said since the rows were read: newer than a row's status, it wins. */
interface LiveState {
  at: string;
  status?: string;
  curr?: number;
  desired?: number;
}

function modelOf(row: Row): string {
  const spec = row.currentVersion.spec;
  if (spec.wandbArtifact) return spec.wandbArtifact.name;
  return spec.hfModelRepoRevision ? `${spec.hfModelRepo ?? ''}@${spec.hfModelRepoRevision}` : (spec.hfModelRepo ?? '');
}

function instanceOf(row: Row): string {
  const o = row.currentVersion.spec.instanceOption;
  return `${o.numGpu} × ${o.gpuType} (${o.gpuMemoryGb} GB)`;
}

function ProjectEndpoints({ project }: { project: { id: string; name: string } }) {
  const { api } = useSession();
  const [rows, setRows] = useState<Row[] | undefined>();
  const [cursor, setCursor] = useState<{ endCursor: string | null; hasNextPage: boolean }>({ endCursor: null, hasNextPage: false });
  const [error, setError] = useState<ApiError | undefined>();
  const [loadingMore, setLoadingMore] = useState(false);
  const [live, setLive] = useState<Record<string, LiveState>>({});
  const [generation, setGeneration] = useState(0);
  const [announcement, setAnnouncement] = useState('');
  // How many rows are shown: a re-read (after a new endpoint) reads as many.
  const shown = useRef(0);
  shown.current = rows?.length ?? 0;

  // The first page (or as many rows as were shown, after a re-read).
  useEffect(() => {
    let cancelled = false;
    const first = Math.min(100, Math.max(PAGE_SIZE, shown.current));
    api
      .request(EndpointsListDocument, { projectId: project.id, first })
      .then((result) => {
        if (cancelled) return;
        setRows(result.endpoints.nodes);
        setCursor(result.endpoints.pageInfo);
        setError(undefined);
      })
      .catch((failure: unknown) => {
        if (!cancelled) setError(failure instanceof ApiError ? failure : new ApiError(String(failure)));
      });
    return () => {
      cancelled = true;
    };
  }, [api, project.id, generation]);

  const loadMore = async () => {
    setLoadingMore(true);
    try {
      const result = await api.request(EndpointsListDocument, { projectId: project.id, first: PAGE_SIZE, after: cursor.endCursor });
      setRows((current) => {
        const seen = new Set((current ?? []).map((r) => r.id));
        return [...(current ?? []), ...result.endpoints.nodes.filter((r) => !seen.has(r.id))];
      });
      setCursor(result.endpoints.pageInfo);
    } catch (failure) {
      setError(failure instanceof ApiError ? failure : new ApiError(String(failure)));
    } finally {
      setLoadingMore(false);
    }
  };

  const onEvent = useCallback((data: EndpointsEventsSubscription) => {
    const event: LiveEvent = data.endpointEvents;
    switch (event.type) {
      case 'CREATED':
      case 'VERSION_ADDED':
        setGeneration((g) => g + 1);
        break;
      case 'DELETED':
        setRows((current) => current?.filter((r) => r.id !== event.endpointId));
        break;
      case 'STATUS_CHANGED':
      case 'REPLICAS_CHANGED':
      case 'RETRYING': {
        setLive((current) => {
          const before = current[event.endpointId];
          const next: LiveState = { ...before, at: event.createdAt };
          if (event.status) next.status = event.status;
          if (event.replicas) {
            next.curr = event.replicas.currReplicaCnt;
            next.desired = event.replicas.desiredReplicaCnt;
          }
          return { ...current, [event.endpointId]: next };
        });
        if (event.type === 'STATUS_CHANGED' && event.status) setAnnouncement(`Endpoint ${event.endpointId} is now ${event.status}.`);
        break;
      }
    }
  }, []);
  const subscription = useSubscription(EndpointsEventsDocument, { projectId: project.id }, onEvent);

  const view = (row: Row) => {
    const state = live[row.id];
    const fresh = state && state.at >= row.status.updatedAt;
    return {
      status: (fresh && state.status) || row.status.status,
      curr: fresh && state.curr !== undefined ? state.curr : row.status.currReplicaCnt,
      desired: fresh && state.desired !== undefined ? state.desired : row.status.desiredReplicaCnt,
    };
  };

  const headingId = `project-${project.id}`;
  return (
    <section className="panel project-endpoints" aria-labelledby={headingId}>
      <div className="project-head">
        <h2 id={headingId}>{project.name}</h2>
        <Link href={`/endpoints/new?project=${encodeURIComponent(project.id)}`} className="button">
          New endpoint<span className="visually-hidden"> in {project.name}</span>
        </Link>
      </div>
      <p className="muted project-id">
        Project <code>{project.id}</code>
      </p>
      <ErrorAlert error={error} />
      {subscription.error && <ErrorAlert error={`Live updates stopped: ${subscription.error.message}`} />}
      <p className="visually-hidden" role="status" aria-live="polite">
        {announcement}
      </p>
      {!rows ? (
        !error && <Loading what={`the endpoints of ${project.name}`} />
      ) : rows.length === 0 ? (
        <p className="empty">
          No endpoints in this project yet. Choose <strong>New endpoint</strong> to serve a hub model or a registry artifact.
        </p>
      ) : (
        <div className="table-wrap">
          <table className="endpoints-table">
            <caption className="visually-hidden">Endpoints of {project.name}</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Status</th>
                <th scope="col">Replicas</th>
                <th scope="col">Model</th>
                <th scope="col">Instance</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((row) => {
                const v = view(row);
                return (
                  <tr key={row.id} data-endpoint-id={row.id}>
                    <td data-label="Name">
                      <div>
                        <Link href={`/endpoints/${row.id}`}>{row.name}</Link>
                        <div className="muted endpoint-id">
                          <code>{row.id}</code>
                        </div>
                      </div>
                    </td>
                    <td data-label="Status">
                      <StatusBadge status={v.status} />
                    </td>
                    <td data-label="Replicas">
                      <span aria-label={`${v.curr} of ${v.desired} replicas`} data-replicas={`${v.curr}/${v.desired}`}>
                        {v.curr}/{v.desired}
                      </span>
                    </td>
                    <td className="model-cell" data-label="Model">
                      <code>{modelOf(row)}</code>
                    </td>
                    <td data-label="Instance">{instanceOf(row)}</td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
      {rows && cursor.hasNextPage && (
        <button type="button" className="secondary" onClick={() => void loadMore()} disabled={loadingMore}>
          {loadingMore ? 'Loading…' : 'Load more'}
        </button>
      )}
    </section>
  );
}

function NewProjectForm({ teamId }: { teamId: string }) {
  const { refreshTeams } = useSession();
  const create = useMutation(EndpointsCreateProjectDocument);
  const [name, setName] = useState('');
  const [fieldError, setFieldError] = useState<string | undefined>();
  const [created, setCreated] = useState<string | undefined>();

  const onSubmit = async (event: FormEvent) => {
    event.preventDefault();
    setCreated(undefined);
    if (name.trim() === '') return setFieldError('must not be empty');
    const result = await create.run({ name, teamId });
    if (!result) return;
    const outcome = result.createProject;
    const failure = failureOf(outcome);
    if (failure || outcome.__typename !== 'CreateProjectSuccess') {
      setFieldError(failure?.fields?.map((f) => f.message).join('; ') || failure?.message);
      return;
    }
    setFieldError(undefined);
    setName('');
    setCreated(outcome.project.name);
    await refreshTeams();
  };

  return (
    <form className="panel new-project" onSubmit={onSubmit} noValidate aria-labelledby="new-project-heading">
      <h2 id="new-project-heading">New project</h2>
      <ErrorAlert error={create.error} />
      {created && <Notice>Project {created} created.</Notice>}
      <div className="inline-form">
        <Field label="Project name" value={name} onChange={(e) => setName(e.target.value)} error={fieldError} autoComplete="off" />
        <button type="submit" disabled={create.pending}>
          {create.pending ? 'Creating…' : 'Create project'}
        </button>
      </div>
    </form>
  );
}

export function EndpointsPage() {
  const { team } = useSession();
  if (!team) {
    return (
      <>
        <h1>Endpoints</h1>
        <p>You belong to no team yet: ask a team owner to add you.</p>
      </>
    );
  }
  return (
    <>
      <h1>Endpoints</h1>
      {team.projects.length === 0 ? (
        <p className="empty">
          Team {team.name} has no project yet. Create a project below, then choose <strong>New endpoint</strong> in it.
        </p>
      ) : (
        team.projects.map((project) => <ProjectEndpoints key={project.id} project={project} />)
      )}
      <NewProjectForm teamId={team.id} />
    </>
  );
}
