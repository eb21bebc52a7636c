/**
 * The resource handlers of the stand-in's API server (core/v1): create, get, list (selectors, limit/continue) and
 * delete of pods, secrets, configmaps, events and namespaces, replace (PUT) of secrets and configmaps, reads of nodes, pod
 * eviction (policy/v1), with the server's defaulting,
 * validation, conflict and not-found answers, graceful pod deletion, and background garbage collection of objects
 * whose ownerReferences name a deleted object.
 */
import {
  ApiError,
  alreadyExists,
  badRequest,
  deletedStatus,
  failure,
  nameSuffix,
  newUid,
  notFound,
  timestamp,
  type KubeObject,
} from './objects.js';
import { defaultPod, isTerminal } from './pod-spec.js';
import { fieldSelector, labelSelector, type Selector } from './selectors.js';
import type { ObjectStore } from './store.js';
import { Causes, dnsLabelError, validateDataKeys, validateMetadata, validatePod } from './validation.js';

export const KINDS: Record<string, string> = {
  pods: 'Pod',
  secrets: 'Secret',
  configmaps: 'ConfigMap',
  events: 'Event',
  nodes: 'Node',
  namespaces: 'Namespace',
};
export const NAMESPACED = new Set(['pods', 'secrets', 'configmaps', 'events']);

/** What the handlers tell the simulated control plane. */
export interface ClusterHooks {
  podCreated(pod: KubeObject): void;
  /** graceful deletion began (or was shortened) */
  podTerminating(pod: KubeObject, graceSeconds: number): void;
  /** the object was removed at once; anything still running for it must be killed */
  podRemoved(pod: KubeObject): void;
  /** a Secret or ConfigMap appeared or changed */
  configChanged(): void;
}

export class ResourceApi {
  constructor(
    private readonly store: ObjectStore,
    private readonly hooks: ClusterHooks,
  ) {}

  selectors(resource: string, query: URLSearchParams): Selector {
    const labels = labelSelector(query.get('labelSelector'));
    const fields = fieldSelector(resource, query.get('fieldSelector'));
    return (object) => labels(object) && fields(object);
  }

  get(resource: string, namespace: string | undefined, name: string): KubeObject {
    const object = this.store.get(resource, namespace, name);
    if (!object) throw notFound(resource, name);
    return { kind: KINDS[resource], apiVersion: 'v1', ...object };
  }

  list(resource: string, namespace: string | undefined, query: URLSearchParams): KubeObject {
    const selector = this.selectors(resource, query);
    const current = this.store.resourceVersion;
    const rvText = query.get('resourceVersion');
    if (rvText && rvText !== '0') {
      const rv = Number(rvText);
      if (!Number.isInteger(rv))
        throw badRequest(`resourceVersion: Invalid value: "${rvText}": strconv.ParseUint: parsing "${rvText}": invalid syntax`);
      if (rv > current)
        throw new ApiError({
          ...failure(504, 'Timeout', `Too large resource version: ${rv}, current: ${current}`, {
            causes: [{ reason: 'ResourceVersionTooLarge', message: 'Too large resource version' }],
          }),
        });
      if (query.get('resourceVersionMatch') === 'Exact' && rv < this.store.oldestResourceVersion)
        throw new ApiError(failure(410, 'Expired', `too old resource version: ${rv} (${this.store.oldestResourceVersion + 1})`));
    }
    let items = this.store.list(resource, namespace).filter(selector);
    let listRv = current;
    let start = 0;
    const token = query.get('continue');
    if (token) {
      let parsed: { rv: number; start: string };
      try {
        parsed = JSON.parse(Buffer.from(token, 'base64url').toString());
      } catch {
        throw badRequest('continue key is not valid: illegal base64 data');
      }
      if (parsed.rv < this.store.oldestResourceVersion)
        throw new ApiError(
          failure(
            410,
            'Expired',
            'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.',
          ),
        );
      listRv = parsed.rv;
      start = items.findIndex((o) => `${o.metadata.namespace ?? ''}/${o.metadata.name}` >= parsed.start);
      if (start < 0) start = items.length;
    }
    const limit = Number(query.get('limit') ?? '0');
    const metadata: Record<string, unknown> = { resourceVersion: String(listRv) };
    if (limit > 0 && items.length - start > limit) {
      const next = items[start + limit]!;
      metadata.continue = Buffer.from(
        JSON.stringify({ rv: listRv, start: `${next.metadata.namespace ?? ''}/${next.metadata.name}` }),
      ).toString('base64url');
      metadata.remainingItemCount = items.length - start - limit;
    }
    items = limit > 0 ? items.slice(start, start + limit) : items.slice(start);
    return { kind: `${KINDS[resource]}List`, apiVersion: 'v1', metadata, items };
  }

  create(resource: string, namespace: string | undefined, body: any): KubeObject {
    const kind = KINDS[resource]!;
    if (body === null || typeof body !== 'object' || Array.isArray(body))
      throw badRequest(`the body of the request was in an unknown format - accepted media types include: application/json`);
    if (body.kind !== undefined && body.kind !== kind)
      throw badRequest(`the kind in the body (${body.kind}) does not match the kind of the resource (${kind})`);
    if (body.apiVersion !== undefined && body.apiVersion !== 'v1')
      throw badRequest(`the API version in the data (${body.apiVersion}) does not match the expected API version (v1)`);
    // The body was parsed from this request alone: it is the handler's to change (the store keeps its own copy).
    const object: KubeObject = { ...body, kind, apiVersion: 'v1', metadata: body.metadata ?? {} };
    const meta = object.metadata;
    if (namespace !== undefined) {
      if (meta.namespace && meta.namespace !== namespace)
        throw badRequest('the namespace of the provided object does not match the namespace sent on the request');
      if (!this.store.get('namespaces', undefined, namespace)) throw notFound('namespaces', namespace);
      meta.namespace = namespace;
    } else delete meta.namespace;
    if (meta.resourceVersion)
      throw new ApiError(failure(500, 'InternalError', 'resourceVersion should not be set on objects to be created'));
    if (!meta.name && meta.generateName) meta.name = `${meta.generateName}${nameSuffix()}`;
    meta.uid = newUid();
    meta.creationTimestamp = timestamp();
    delete meta.deletionTimestamp;
    delete meta.deletionGracePeriodSeconds;
    const causes = new Causes();
    switch (resource) {
      case 'pods':
        defaultPod(object);
        validatePod(object);
        break;
      case 'secrets':
        prepareSecret(object, causes);
        break;
      case 'configmaps':
        validateMetadata(object, causes);
        validateDataKeys('data', object.data, causes);
        validateDataKeys('binaryData', object.binaryData, causes);
        for (const key of Object.keys(object.data ?? {}))
          if (object.binaryData?.[key] !== undefined) causes.invalid('data', key, 'duplicate of key present in binaryData');
        break;
      case 'events':
        validateMetadata(object, causes);
        if ((object.involvedObject?.namespace ?? namespace) !== namespace)
          causes.invalid('involvedObject.namespace', object.involvedObject?.namespace, 'does not match event.namespace');
        if (object.type && !['Normal', 'Warning'].includes(object.type)) causes.notSupported('type', object.type, ['Normal', 'Warning']);
        break;
      case 'namespaces':
        validateMetadata(object, causes, dnsLabelError);
        object.spec = { finalizers: ['kubernetes'] };
        object.status = { phase: 'Active' };
        break;
    }
    causes.fail(kind, meta.name ?? '');
    if (this.store.get(resource, namespace, meta.name)) throw alreadyExists(resource, meta.name);
    const stored = this.store.create(resource, object);
    if (resource === 'pods') this.hooks.podCreated(stored);
    if (resource === 'secrets' || resource === 'configmaps') this.hooks.configChanged();
    return stored;
  }

  /**
   * PUT of a Secret or ConfigMap: the whole object replaced, its identity (uid, creation time) kept. A resourceVersion
   * in the body is a precondition (409 Conflict when the object changed since); none updates unconditionally.
   */
  replace(resource: string, namespace: string, name: string, body: any): KubeObject {
    const kind = KINDS[resource]!;
    if (body === null || typeof body !== 'object' || Array.isArray(body) || typeof body.metadata !== 'object' || body.metadata === null)
      throw badRequest(`the body of the request was in an unknown format - accepted media types include: application/json`);
    if (body.metadata.name !== name)
      throw badRequest(`the name of the object (${body.metadata.name ?? ''}) does not match the name on the URL (${name})`);
    if (body.metadata.namespace !== undefined && body.metadata.namespace !== namespace)
      throw badRequest('the namespace of the provided object does not match the namespace sent on the request');
    const current = this.store.get(resource, namespace, name);
    if (!current) throw notFound(resource, name);
    const conflict =
      (body.metadata.resourceVersion && body.metadata.resourceVersion !== current.metadata.resourceVersion) ||
      (body.metadata.uid && body.metadata.uid !== current.metadata.uid);
    if (conflict)
      throw new ApiError(
        failure(
          409,
          'Conflict',
          `Operation cannot be fulfilled on ${resource} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
          { name, kind: resource },
        ),
      );
    const object: KubeObject = { ...body, kind, apiVersion: 'v1' };
    const causes = new Causes();
    if (resource === 'secrets') prepareSecret(object, causes);
    else validateDataKeys('data', object.data, causes);
    causes.fail(kind, name);
    const stored = this.store.update(resource, namespace, name, (draft) => {
      const { uid, creationTimestamp } = draft.metadata;
      for (const key of Object.keys(draft)) delete draft[key];
      Object.assign(draft, JSON.parse(JSON.stringify(object)));
      draft.metadata = { ...draft.metadata, namespace, uid, creationTimestamp };
    })!;
    this.hooks.configChanged();
    return stored;
  }

  /** DELETE: pods answer with the (terminating or removed) pod, other resources with a Success Status. */
  delete(resource: string, namespace: string | undefined, name: string, query: URLSearchParams, body: any): KubeObject {
    const options = body && typeof body === 'object' ? body : {};
    const object = this.store.get(resource, namespace, name);
    if (!object) throw notFound(resource, name);
    const pre = options.preconditions ?? {};
    if (pre.uid && pre.uid !== object.metadata.uid)
      throw new ApiError(
        failure(409, 'Conflict', `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${object.metadata.uid}`, {
          name,
          kind: resource,
        }),
      );
    if (pre.resourceVersion && pre.resourceVersion !== object.metadata.resourceVersion)
      throw new ApiError(
        failure(
          409,
          'Conflict',
          `Precondition failed: ResourceVersion in precondition: ${pre.resourceVersion}, ResourceVersion in object meta: ${object.metadata.resourceVersion}`,
          { name, kind: resource },
        ),
      );
    const graceText = query.get('gracePeriodSeconds');
    const grace = graceText !== null ? Number(graceText) : options.gracePeriodSeconds;
    if (grace !== undefined && grace !== null && !(Number.isInteger(grace) && grace >= 0))
      throw badRequest(`gracePeriodSeconds: Invalid value: ${grace}: must be >= 0`);
    const propagation: string = query.get('propagationPolicy') ?? options.propagationPolicy ?? 'Background';
    if (resource === 'pods') return { kind: 'Pod', apiVersion: 'v1', ...this.deletePod(object, grace ?? undefined, propagation) };
    this.store.remove(resource, namespace, name);
    this.collect(object.metadata.uid, propagation);
    return deletedStatus(resource, name, object.metadata.uid);
  }

  deletePod(pod: KubeObject, requestedGrace: number | undefined, propagation = 'Background'): KubeObject {
    const { namespace, name } = pod.metadata;
    let grace: number = requestedGrace ?? pod.spec.terminationGracePeriodSeconds ?? 30;
    if (!pod.spec.nodeName || isTerminal(pod)) grace = 0;
    if (grace === 0) {
      const removed = this.store.remove('pods', namespace, name)!;
      this.hooks.podRemoved(removed);
      this.collect(pod.metadata.uid, propagation);
      return removed;
    }
    if (pod.metadata.deletionTimestamp) {
      if (grace >= pod.metadata.deletionGracePeriodSeconds) return pod;
    }
    const updated = this.store.update('pods', namespace, name, (draft) => {
      draft.metadata.deletionTimestamp = timestamp(Date.now() + grace * 1000);
      draft.metadata.deletionGracePeriodSeconds = grace;
    })!;
    this.hooks.podTerminating(updated, grace);
    this.collect(pod.metadata.uid, propagation);
    return updated;
  }

  /**
   * `POST pods/{name}/eviction` (policy/v1 Eviction: what `kubectl drain` and a node pool's upgrade send): the pod gets
   * the DisruptionTarget condition, then is deleted with the eviction's grace, else its own. No PodDisruptionBudget
   * is served here, so none refuses it (429).
   */
  evict(namespace: string, name: string, body: any): KubeObject {
    const pod = this.get('pods', namespace, name);
    if (body?.kind !== 'Eviction' || body.apiVersion !== 'policy/v1')
      throw badRequest(`the body of the request is not a policy/v1 Eviction (kind ${body?.kind}, apiVersion ${body?.apiVersion})`);
    if (body.metadata?.name !== name) throw badRequest('name in URL does not match name in Eviction object');
    const grace = body.deleteOptions?.gracePeriodSeconds;
    if (grace !== undefined && !(Number.isInteger(grace) && grace >= 0))
      throw badRequest(`gracePeriodSeconds: Invalid value: ${grace}: must be >= 0`);
    if (!pod.metadata.deletionTimestamp) {
      const marked = this.store.update('pods', namespace, name, (draft) => {
        draft.status ??= {};
        draft.status.conditions = [
          ...(draft.status.conditions ?? []).filter((c: any) => c.type !== 'DisruptionTarget'),
          {
            type: 'DisruptionTarget',
            status: 'True',
            reason: 'EvictionByEvictionAPI',
            message: 'Eviction API: evicting',
            lastTransitionTime: timestamp(Date.now()),
          },
        ];
      })!;
      this.deletePod(marked, grace);
    }
    return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', code: 201 };
  }

  /** Background garbage collection: every object naming `uid` as an owner is deleted (Orphan: the reference is dropped). */
  collect(uid: string, propagation: string): void {
    setImmediate(() => {
      for (const resource of ['pods', 'secrets', 'configmaps']) {
        const dependents = [...this.store.all(resource)].filter((o) => (o.metadata.ownerReferences ?? []).some((r: any) => r.uid === uid));
        for (const dependent of dependents) {
          const { namespace, name } = dependent.metadata;
          if (propagation === 'Orphan') {
            this.store.update(resource, namespace, name, (draft) => {
              draft.metadata.ownerReferences = draft.metadata.ownerReferences.filter((r: any) => r.uid !== uid);
              if (draft.metadata.ownerReferences.length === 0) delete draft.metadata.ownerReferences;
            });
          } else if (resource === 'pods') {
            if (!dependent.metadata.deletionTimestamp) this.deletePod(dependent, undefined);
          } else {
            this.store.remove(resource, namespace, name);
            this.collect(dependent.metadata.uid, propagation);
          }
        }
      }
    });
  }
}

function prepareSecret(secret: KubeObject, causes: Causes): void {
  validateMetadata(secret, causes);
  secret.type ??= 'Opaque';
  const data: Record<string, string> = { ...(secret.data ?? {}) };
  for (const [key, value] of Object.entries(data)) {
    if (typeof value !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(value) || value.length % 4 !== 0)
      throw badRequest(`Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte 0`);
    void key;
  }
  for (const [key, value] of Object.entries(secret.stringData ?? {})) data[key] = Buffer.from(String(value)).toString('base64');
  delete secret.stringData;
  secret.data = data;
  validateDataKeys('data', data, causes);
  const size = Object.values(data).reduce((sum, v) => sum + Buffer.from(v, 'base64').length, 0);
  if (size > 1024 * 1024)
    causes.list.push({ reason: 'FieldValueTooLong', message: `Too long: may not be more than 1048576 bytes`, field: 'data' });
}
