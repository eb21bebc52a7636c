/**
 * A tiny Kustomize, for the tests of deploy/: no kustomize binary comes with `npm ci`. It renders what our
 * kustomizations use and refuses the rest, so that a new field in deploy/ makes the tests fail here instead of
 * rendering wrong: `resources` (files and folders with their own kustomization), `namespace`, `commonLabels`,
 * `labels`, `images` and `replacements` (source and targets by kind and name, with `[key=value]` list selectors).
 * Transformations run in kustomize's order (namespace, labels, images, replacements), each level's after those of
 * the folders it includes. Where `kubectl kustomize` is on the PATH, manifests.test.ts compares the two renderings.
 */
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { parseAllDocuments, parse as parseYaml } from 'yaml';

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; [key: string]: unknown };
  [key: string]: any;
}

interface LabelsEntry {
  pairs: Record<string, string>;
  includeSelectors?: boolean;
  includeTemplates?: boolean;
}

interface ImageEntry {
  name: string;
  newName?: string;
  newTag?: string;
  digest?: string;
}

interface Replacement {
  source: { kind: string; name: string; fieldPath: string };
  targets: { select: { kind: string; name: string }; fieldPaths: string[] }[];
}

interface Kustomization {
  apiVersion?: string;
  kind?: string;
  resources?: string[];
  namespace?: string;
  commonLabels?: Record<string, string>;
  labels?: LabelsEntry[];
  images?: ImageEntry[];
  replacements?: Replacement[];
}

const SUPPORTED_FIELDS = new Set(['apiVersion', 'kind', 'resources', 'namespace', 'commonLabels', 'labels', 'images', 'replacements']);

/** Kinds without a namespace. */
const CLUSTER_SCOPED = new Set(['Namespace', 'ClusterRole', 'ClusterRoleBinding', 'PersistentVolume', 'StorageClass', 'PriorityClass']);
/** Kinds with a pod template at spec.template and a label selector at spec.selector.matchLabels. */
const WORKLOADS = new Set(['Deployment', 'StatefulSet', 'DaemonSet', 'ReplicaSet']);
/** Kinds with a label selector at spec.selector.matchLabels and no pod template. */
const SELECTING = new Set(['PodDisruptionBudget']);
/** Kinds with neither selectors nor images: labels go on their metadata only. */
const PLAIN = new Set([
  'Namespace',
  'ServiceAccount',
  'Role',
  'RoleBinding',
  'ClusterRole',
  'ClusterRoleBinding',
  'ConfigMap',
  'Secret',
  'PersistentVolumeClaim',
]);
/**
 * Kinds whose selectors kustomize rewrites with `includeSelectors` (a NetworkPolicy's podSelector and its peers'), which
 * this renderer does not do: labels without selectors go on their metadata only, and with selectors are refused.
 */
const SELECTORS_UNSUPPORTED = new Set(['NetworkPolicy']);

export class UnsupportedKustomization extends Error {}

export function kustomize(dir: string): K8sObject[] {
  const file = path.join(dir, 'kustomization.yaml');
  const k = parseYaml(readFileSync(file, 'utf8')) as Kustomization;
  for (const field of Object.keys(k)) {
    if (!SUPPORTED_FIELDS.has(field))
      throw new UnsupportedKustomization(`${file}: "${field}" is not supported by test/deploy/kustomize.ts`);
  }
  const objects: K8sObject[] = [];
  for (const resource of k.resources ?? []) {
    const target = path.resolve(dir, resource);
    if (statSync(target).isDirectory()) objects.push(...kustomize(target));
    else objects.push(...readObjects(target));
  }
  for (const object of objects) {
    const known =
      PLAIN.has(object.kind) || WORKLOADS.has(object.kind) || SELECTING.has(object.kind) || SELECTORS_UNSUPPORTED.has(object.kind);
    if (!known && object.kind !== 'Service') {
      throw new UnsupportedKustomization(
        `${object.kind} ${object.metadata.name}: test/deploy/kustomize.ts does not know where its selectors are`,
      );
    }
  }
  if (k.namespace) for (const object of objects) setNamespace(object, k.namespace);
  if (k.commonLabels) for (const object of objects) addLabels(object, { pairs: k.commonLabels, includeSelectors: true });
  for (const entry of k.labels ?? []) for (const object of objects) addLabels(object, entry);
  for (const image of k.images ?? []) for (const object of objects) setImage(object, image);
  for (const replacement of k.replacements ?? []) replace(objects, replacement, file);
  return objects;
}

/** Every document of a manifest file, empty ones (a comment, a lone `---`) left out. */
export function readObjects(file: string): K8sObject[] {
  return parseAllDocuments(readFileSync(file, 'utf8'))
    .map((doc) => {
      if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors[0]!.message}`);
      return doc.toJSON() as K8sObject | null;
    })
    .filter((object): object is K8sObject => object !== null && object !== undefined);
}

function setNamespace(object: K8sObject, namespace: string): void {
  const before = object.metadata.namespace;
  if (object.kind === 'Namespace') object.metadata.name = namespace;
  else if (!CLUSTER_SCOPED.has(object.kind)) object.metadata.namespace = namespace;
  // Kustomize's rule for bindings: a ServiceAccount subject in the binding's old namespace (`default` when none) moves too.
  if (object.kind === 'RoleBinding' || object.kind === 'ClusterRoleBinding') {
    for (const subject of object.subjects ?? []) {
      if (subject.kind === 'ServiceAccount' && subject.namespace === (before ?? 'default')) subject.namespace = namespace;
    }
  }
}

function addLabels(object: K8sObject, entry: LabelsEntry): void {
  if (SELECTORS_UNSUPPORTED.has(object.kind) && entry.includeSelectors) {
    throw new UnsupportedKustomization(`${object.kind} ${object.metadata.name}: test/deploy/kustomize.ts does not rewrite its selectors`);
  }
  object.metadata.labels = { ...object.metadata.labels, ...entry.pairs };
  if (WORKLOADS.has(object.kind)) {
    if (entry.includeSelectors || entry.includeTemplates) {
      const template = (object.spec.template ??= {});
      template.metadata ??= {};
      template.metadata.labels = { ...template.metadata.labels, ...entry.pairs };
    }
    if (entry.includeSelectors) {
      object.spec.selector ??= {};
      object.spec.selector.matchLabels = { ...object.spec.selector.matchLabels, ...entry.pairs };
    }
  }
  if (SELECTING.has(object.kind) && entry.includeSelectors) {
    object.spec.selector ??= {};
    object.spec.selector.matchLabels = { ...object.spec.selector.matchLabels, ...entry.pairs };
  }
  if (object.kind === 'Service' && entry.includeSelectors) {
    object.spec ??= {};
    object.spec.selector = { ...object.spec.selector, ...entry.pairs };
  }
}

/** `name[:tag][@digest]`, the tag's colon being after the last slash (a registry may have a port). */
export function splitImage(image: string): { name: string; tag?: string; digest?: string } {
  const [rest, digest] = image.split('@') as [string, string | undefined];
  const colon = rest.lastIndexOf(':');
  const hasTag = colon > rest.lastIndexOf('/');
  return {
    name: hasTag ? rest.slice(0, colon) : rest,
    ...(hasTag ? { tag: rest.slice(colon + 1) } : {}),
    ...(digest ? { digest } : {}),
  };
}

function setImage(object: K8sObject, entry: ImageEntry): void {
  const podSpec = WORKLOADS.has(object.kind) ? object.spec?.template?.spec : undefined;
  if (!podSpec) return;
  for (const container of [...(podSpec.containers ?? []), ...(podSpec.initContainers ?? [])]) {
    const current = splitImage(container.image);
    if (current.name !== entry.name) continue;
    let image = entry.newName ?? current.name;
    if (entry.digest) image += `@${entry.digest}`;
    else if (entry.newTag) image += `:${entry.newTag}`;
    else if (current.tag) image += `:${current.tag}${current.digest ? `@${current.digest}` : ''}`;
    else if (current.digest) image += `@${current.digest}`;
    container.image = image;
  }
}

/** `a.b.[name=x].c`: dots separate the steps, `[key=value]` picks the list item whose `key` is `value`. */
function steps(fieldPath: string): string[] {
  return fieldPath.match(/\[[^\]]*\]|[^.[\]]+/g) ?? [];
}

function step(node: any, part: string): any {
  const selector = /^\[([^=\]]+)=([^\]]*)\]$/.exec(part);
  if (selector) return Array.isArray(node) ? node.find((item) => item?.[selector[1]!] === selector[2]) : undefined;
  return node === null || typeof node !== 'object' ? undefined : node[part];
}

function replace(objects: K8sObject[], replacement: Replacement, file: string): void {
  const { source, targets } = replacement;
  const pick = (kind: string, name: string) => objects.filter((o) => o.kind === kind && o.metadata.name === name);
  const sources = pick(source.kind, source.name);
  if (sources.length !== 1) throw new Error(`${file}: replacement source ${source.kind}/${source.name} matches ${sources.length} objects`);
  const value = steps(source.fieldPath).reduce(step, sources[0]);
  if (value === undefined) throw new Error(`${file}: replacement source ${source.fieldPath} is not there`);
  for (const target of targets) {
    for (const object of pick(target.select.kind, target.select.name)) {
      for (const fieldPath of target.fieldPaths) {
        const parts = steps(fieldPath);
        const parent = parts.slice(0, -1).reduce(step, object);
        const last = parts.at(-1)!;
        if (parent === undefined || last.startsWith('[') || !(last in parent)) {
          throw new Error(`${file}: replacement target ${fieldPath} is not there in ${object.kind}/${object.metadata.name}`);
        }
        parent[last] = structuredClone(value);
      }
    }
  }
}
