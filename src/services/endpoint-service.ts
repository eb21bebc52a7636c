/**
 * The endpoint rules: create, read, list, update (a new version each time),
 * the lifecycle actions, rollback and delete. REST routes and GraphQL
 * resolvers both call these functions. Each change runs in one transaction
 * that locks the endpoint row, so concurrent writers serialize, and writes
 * the status change and its event together.
 */
import { parseCreateEndpoint, parseUpdateEndpoint, type EndpointSpec } from '../domain/endpoint-spec.js';
import { formatArtifactName } from '../domain/artifact-name.js';
import { artifactSpec, generatedProjectName, parseArtifactCreate } from '../domain/artifact-request.js';
import { newId } from '../domain/ids.js';
import { holdsNoReplicas, isAllowed, noReplicasMessage, transitionTarget, type LifecycleAction } from '../domain/lifecycle.js';
import { parsePageRequest, toPage, type Page } from '../domain/pagination.js';
import { fail, invalidArgument, invalidTransition, notFound, ok, type Result } from '../domain/result.js';
import type { EndpointEventInput, EndpointRecord, VersionRecord } from '../domain/endpoint.js';
import type { ProjectRecord } from '../domain/identity.js';
import type { Sql, TransactionSql } from '../storage/database.js';
import {
  findEndpointIdByKey,
  findEndpoints,
  insertEndpoint,
  listEndpoints,
  lockEndpoint,
  markEndpointDeleted,
} from '../storage/endpoints-repository.js';
import { latestEventId } from '../storage/events-repository.js';
import { commitWith, committed, type Committing } from './commit-with.js';
import { findVersion, insertVersion, listVersions } from '../storage/versions-repository.js';
import { writeStatusRow } from './endpoint-state.js';
import type { IdentityService } from './identity-service.js';
import { visibleTo, type Principal } from './principal.js';

export type EndpointAction = Extract<LifecycleAction, 'sleep' | 'wake' | 'restart' | 'terminate'>;

interface NewVersion {
  spec: EndpointSpec;
  comment: string | null;
  rolledBackFrom?: number;
}

const ENDPOINT_CURSOR = 'ep';
const VERSION_CURSOR = 'ver';

export class EndpointService {
  /** Told of each change made through this service, once it is committed (see `onChange`). */
  private readonly listeners = new Set<(endpointId: string) => void>();

  constructor(
    private readonly db: Sql,
    private readonly identity: IdentityService,
    onChange?: (endpointId: string) => void,
  ) {
    if (onChange) this.listeners.add(onChange);
  }

  /**
   * Calls `listener` with an endpoint's id after each change made through
   * this service is committed: this process's controller and router react at
   * once, before the change is announced to every process. Returns the
   * function that stops it.
   */
  onChange(listener: (endpointId: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Tells the listeners after a successful change. */
  private changed<T>(id: string, result: Result<T>): Result<T> {
    if (result.type === 'ok') for (const listener of this.listeners) listener(id);
    return result;
  }

  async get(principal: Principal, id: string): Promise<Result<EndpointRecord>> {
    const [found] = await findEndpoints(this.db, [id]);
    const endpoint = visibleTo(principal, found);
    return endpoint ? ok(endpoint) : fail(notFound('endpoint', id));
  }

  /**
   * The newest event id of an endpoint ('0' when it has none): where a live
   * subscription starts. A position only, which tells nothing about the
   * endpoint; the subscription checks access with `get`.
   */
  latestEventId(endpointId: string): Promise<string> {
    return latestEventId(this.db, { endpointId });
  }

  async create(principal: Principal, body: unknown): Promise<Result<EndpointRecord>> {
    const parsed = parseCreateEndpoint(body);
    if (parsed.type === 'error') return parsed;
    const { projectId, spec, comment } = parsed.value;
    const project = await this.identity.getProject(principal, projectId);
    if (project.type === 'error') return project;

    const created = await this.insertNew(principal, project.value, spec, comment, null, 'api:create');
    return this.changed(created!.id, ok(created!));
  }

  /**
   * Inserts a new endpoint with version 0, INITIALIZING. With an idempotency
   * key that already names a live endpoint of the project, inserts nothing and
   * returns undefined.
   */
  private async insertNew(
    principal: Principal,
    project: ProjectRecord,
    spec: EndpointSpec,
    comment: string | null,
    idempotencyKey: string | null,
    cause: string,
  ): Promise<EndpointRecord | undefined> {
    const id = newId('ep');
    const written = await this.db.begin(async (tx) => {
      const status = 'INITIALIZING';
      const phase = 'REQUESTING_VIRTUAL_MACHINE';
      const inserted = await insertEndpoint(tx, {
        id,
        projectId: project.id,
        teamId: project.teamId,
        creatorId: principal.user.id,
        status,
        phase,
        desiredState: 'RUNNING',
        idempotencyKey,
      });
      if (!inserted) return undefined;
      await insertVersion(tx, { endpointId: id, versionIndex: 0, spec, comment, creatorId: principal.user.id });
      return commitWith(tx, id, [
        {
          endpointId: id,
          projectId: project.id,
          teamId: project.teamId,
          type: 'CREATED',
          status,
          phase,
          errorCode: null,
          versionIndex: 0,
          cause,
          actorId: principal.user.id,
        },
      ]);
    });
    return written && (await written.done);
  }

  /**
   * Creates an endpoint from a registry artifact version, or, when the
   * idempotency key already created one in the project, rolls that endpoint
   * out to the artifact (a new version). The key is unique per project in
   * the database, so concurrent calls with one key make one endpoint.
   */
  async createFromArtifact(
    principal: Principal,
    body: unknown,
  ): Promise<Result<{ endpoint: EndpointRecord; project: ProjectRecord; created: boolean }>> {
    const parsed = parseArtifactCreate(body);
    if (parsed.type === 'error') return parsed;
    const input = parsed.value;
    // A new endpoint's spec is checked before anything is written: a refused call must not leave a new project behind.
    const fresh = artifactSpec(input, null);
    if (fresh.type === 'error' && !input.projectId) return fresh;
    let project: ProjectRecord;
    if (input.projectId) {
      const found = await this.identity.getProject(principal, input.projectId);
      if (found.type === 'error') return found;
      project = found.value;
    } else {
      const created = await this.identity.createProject(principal, { name: generatedProjectName(input.artifact) });
      if (created.type === 'error') return created;
      project = created.value;
    }
    const artifact = formatArtifactName(input.artifact);
    for (let attempt = 0; attempt < 3; attempt++) {
      const existing = input.idempotencyKey ? await findEndpointIdByKey(this.db, project.id, input.idempotencyKey) : undefined;
      if (existing) {
        const comment = `Rollout of ${artifact}`;
        const rolled = await this.appendVersion(principal, existing, 'update', (current) => {
          const spec = artifactSpec(input, current.spec);
          return spec.type === 'ok' ? ok({ spec: spec.value, comment }) : spec;
        });
        if (rolled.type === 'error' && rolled.error.type === 'NOT_FOUND') continue; // deleted meanwhile: create anew
        return rolled.type === 'ok' ? ok({ endpoint: rolled.value, project, created: false }) : rolled;
      }
      const spec = artifactSpec(input, null);
      if (spec.type === 'error') return spec;
      const created = await this.insertNew(
        principal,
        project,
        spec.value,
        `Created from ${artifact}`,
        input.idempotencyKey,
        'api:wandb-artifact-create',
      );
      if (created) return this.changed(created.id, ok({ endpoint: created, project, created: true }));
      // Another call with this key created it first: roll that one out instead.
    }
    throw new Error('idempotency key kept changing hands');
  }

  /** Endpoints of one project, or of the acting team when no project is given. */
  async list(
    principal: Principal,
    query: { projectId?: string | null; cursor?: unknown; limit?: unknown },
    names?: { cursor: string; limit: string },
  ): Promise<Result<Page<EndpointRecord>>> {
    // Endpoint positions are `seq`, a bigserial.
    const page = parsePageRequest(ENDPOINT_CURSOR, query, names, -1, Number.MAX_SAFE_INTEGER);
    if (page.type === 'error') return page;
    let scope: { projectIds: string[] } | { teamIds: string[] };
    if (query.projectId) {
      const project = await this.identity.getProject(principal, query.projectId);
      if (project.type === 'error') return project;
      scope = { projectIds: [project.value.id] };
    } else {
      scope = { teamIds: principal.actingTeamId ? [principal.actingTeamId] : [] };
    }
    const { after, limit } = page.value;
    const rows = await listEndpoints(this.db, scope, { afterSeq: after, limit: limit + 1 });
    return ok(toPage(ENDPOINT_CURSOR, rows, limit, (e) => e.seq));
  }

  async versions(
    principal: Principal,
    id: string,
    query: { cursor?: unknown; limit?: unknown },
    names?: { cursor: string; limit: string },
  ): Promise<Result<{ endpoint: EndpointRecord; page: Page<VersionRecord> }>> {
    const page = parsePageRequest(VERSION_CURSOR, query, names);
    if (page.type === 'error') return page;
    const endpoint = await this.get(principal, id);
    if (endpoint.type === 'error') return endpoint;
    return ok({ endpoint: endpoint.value, page: await this.versionPage(id, page.value) });
  }

  /**
   * A page of versions of an endpoint already known to be visible (used by GraphQL field resolvers): oldest first, or
   * newest first (`page.after` then counts down from the start that parsePageRequest was given, INT4_MAX).
   */
  async versionPage(endpointId: string, page: { after: number; limit: number }, newestFirst = false): Promise<Page<VersionRecord>> {
    const rows = await listVersions(this.db, endpointId, { afterIndex: page.after, limit: page.limit + 1, newestFirst });
    return toPage(VERSION_CURSOR, rows, page.limit, (v) => v.versionIndex);
  }

  async update(principal: Principal, id: string, body: unknown): Promise<Result<EndpointRecord>> {
    const parsed = parseUpdateEndpoint(body);
    if (parsed.type === 'error') return parsed;
    const { comment, apply } = parsed.value;
    return this.appendVersion(principal, id, 'update', (current) => {
      const spec = apply(current.spec);
      return spec.type === 'ok' ? ok({ spec: spec.value, comment }) : spec;
    });
  }

  async rollback(principal: Principal, id: string, versionIndex: number): Promise<Result<EndpointRecord>> {
    if (!Number.isInteger(versionIndex) || versionIndex < 0) {
      return fail(invalidArgument([{ field: 'versionIndex', message: 'must be a non-negative integer' }]));
    }
    const target = await findVersion(this.db, id, versionIndex);
    return this.appendVersion(principal, id, 'rollback', () =>
      target
        ? ok({ spec: target.spec, comment: `Rollback to version ${versionIndex}`, rolledBackFrom: versionIndex })
        : fail(notFound('version', `${versionIndex} of endpoint ${id}`)),
    );
  }

  /**
   * Appends exactly one version under the endpoint's row lock, so concurrent
   * updates get distinct, consecutive indexes.
   */
  private async appendVersion(
    principal: Principal,
    id: string,
    action: 'update' | 'rollback',
    next: (current: VersionRecord) => Result<NewVersion>,
  ): Promise<Result<EndpointRecord>> {
    const outcome = await this.db.begin(async (tx): Promise<Result<Committing>> => {
      const endpoint = visibleTo(principal, await lockEndpoint(tx, id));
      if (!endpoint) return fail(notFound('endpoint', id));
      if (!isAllowed(action, endpoint.status)) return fail(invalidTransition(action, endpoint.status));
      const proposed = next(endpoint.current);
      if (proposed.type === 'error') return proposed;
      const change = proposed.value;
      const versionIndex = endpoint.current.versionIndex + 1;
      await insertVersion(tx, {
        endpointId: id,
        versionIndex,
        spec: change.spec,
        comment: change.comment,
        creatorId: principal.user.id,
        rolledBackFrom: change.rolledBackFrom ?? null,
      });
      const statusEvent = await this.transition(tx, endpoint, action, principal.user.id, versionIndex);
      const added: EndpointEventInput = {
        ...eventScope(endpoint),
        type: 'VERSION_ADDED',
        status: null,
        phase: null,
        errorCode: null,
        versionIndex,
        cause: `api:${action}`,
        actorId: principal.user.id,
      };
      // updatedReplicaCnt counts the newest version's ready replicas: none yet, unless handed over later.
      return ok(commitWith(tx, id, [...listed(statusEvent), added], { refresh: `api:${action}` }));
    });
    return this.changed(id, await committed(outcome));
  }

  async act(principal: Principal, id: string, action: EndpointAction): Promise<Result<EndpointRecord>> {
    const outcome = await this.db.begin(async (tx): Promise<Result<Committing>> => {
      const endpoint = visibleTo(principal, await lockEndpoint(tx, id));
      if (!endpoint) return fail(notFound('endpoint', id));
      if (!isAllowed(action, endpoint.status)) return fail(invalidTransition(action, endpoint.status));
      if (action === 'wake' && holdsNoReplicas(endpoint)) {
        return fail({ ...invalidTransition(action, endpoint.status), message: noReplicasMessage(id) });
      }
      return ok(commitWith(tx, id, listed(await this.transition(tx, endpoint, action, principal.user.id))));
    });
    return this.changed(id, await committed(outcome));
  }

  /** Deletes the endpoint; the answer is its final state, as this transaction left it (deleted, replicas still to stop). */
  async delete(principal: Principal, id: string): Promise<Result<EndpointRecord>> {
    const outcome = await this.db.begin(async (tx): Promise<Result<Committing>> => {
      const endpoint = visibleTo(principal, await lockEndpoint(tx, id));
      if (!endpoint) return fail(notFound('endpoint', id));
      await markEndpointDeleted(tx, id);
      const deleted: EndpointEventInput = {
        ...eventScope(endpoint),
        type: 'DELETED',
        status: endpoint.status,
        phase: null,
        errorCode: null,
        versionIndex: null,
        cause: 'api:delete',
        actorId: principal.user.id,
      };
      return ok(commitWith(tx, id, [deleted], { includeDeleted: true }));
    });
    return this.changed(id, await committed(outcome));
  }

  /** Applies the lifecycle table's target through the shared status writer. */
  private async transition(
    tx: TransactionSql,
    endpoint: EndpointRecord,
    action: LifecycleAction,
    actorId: string,
    currentVersion?: number,
  ): Promise<EndpointEventInput | undefined> {
    const target = transitionTarget(action, endpoint.status, { hasReplicas: endpoint.currReplicaCnt > 0 });
    // An action that keeps the status (an update of a sleeping endpoint) keeps its phase too.
    const phase = target.status === endpoint.status && target.phase === null ? endpoint.phase : target.phase;
    return writeStatusRow(tx, endpoint, {
      status: target.status,
      phase,
      errorCode: target.clearsError ? null : endpoint.errorCode,
      desiredState: target.desiredState,
      ...(currentVersion !== undefined ? { currentVersion } : {}),
      cause: `api:${action}`,
      actorId,
    });
  }
}

const listed = <T>(item: T | undefined): T[] => (item === undefined ? [] : [item]);

function eventScope(endpoint: EndpointRecord) {
  return { endpointId: endpoint.id, projectId: endpoint.projectId, teamId: endpoint.teamId };
}
