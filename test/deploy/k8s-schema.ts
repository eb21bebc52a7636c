/**
 * Checks a Kubernetes object against the API's OpenAPI schema (the `kubernetes-models` package: its models carry
 * the schemas of Kubernetes' own API, compiled). Those schemas allow fields they do not define, which an API server
 * refuses (kubectl's strict field validation) or silently drops (`readinesProbe:` would be no probe at all); so this
 * also reports every field that the schema's validator never looked at in an object whose other fields it did read.
 */
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ClusterRole } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRole';
import { ClusterRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRoleBinding';
import { Role } from 'kubernetes-models/rbac.authorization.k8s.io/v1/Role';
import { RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { PersistentVolumeClaim } from 'kubernetes-models/v1/PersistentVolumeClaim';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { Toleration } from 'kubernetes-models/v1/Toleration';

interface KubernetesModel {
  validate(): void;
  toJSON(): object;
}
type ModelClass = new (data?: any) => KubernetesModel;

const MODELS: Record<string, ModelClass> = {
  'apps/v1 Deployment': Deployment,
  'networking.k8s.io/v1 NetworkPolicy': NetworkPolicy,
  'policy/v1 PodDisruptionBudget': PodDisruptionBudget,
  'rbac.authorization.k8s.io/v1 ClusterRole': ClusterRole,
  'rbac.authorization.k8s.io/v1 ClusterRoleBinding': ClusterRoleBinding,
  'rbac.authorization.k8s.io/v1 Role': Role,
  'rbac.authorization.k8s.io/v1 RoleBinding': RoleBinding,
  'v1 ConfigMap': ConfigMap,
  'v1 Namespace': Namespace,
  'v1 PersistentVolumeClaim': PersistentVolumeClaim,
  'v1 Secret': Secret,
  'v1 Service': Service,
  'v1 ServiceAccount': ServiceAccount,
};

/** The problems of one Kubernetes object (`apiVersion` and `kind` pick its schema); none: it is valid. */
export function schemaProblems(object: { apiVersion?: unknown; kind?: unknown }): string[] {
  const model = MODELS[`${String(object.apiVersion)} ${String(object.kind)}`];
  if (!model)
    return [`no schema here for apiVersion ${String(object.apiVersion)} kind ${String(object.kind)} (add it to test/deploy/k8s-schema.ts)`];
  return problemsOf(model, object);
}

/** The problems of a toleration (one item of a Pod's spec.tolerations). */
export function tolerationProblems(toleration: unknown): string[] {
  return problemsOf(Toleration, toleration);
}

function problemsOf(model: ModelClass, data: unknown): string[] {
  const plain = new model(data).toJSON();
  const { proxy, reads } = tracking(plain);
  const problems: string[] = [];
  try {
    // The validator runs on a proxy of the data that records which fields it reads.
    (model.prototype as KubernetesModel).validate.call(proxy);
  } catch (error) {
    problems.push(String((error as Error).message));
  }
  problems.push(...unknownFields(plain, reads).map((field) => `unknown field ${field}`));
  return problems;
}

function tracking(root: object): { proxy: object; reads: WeakMap<object, Set<string>> } {
  const reads = new WeakMap<object, Set<string>>();
  const wrap = (value: unknown): unknown => {
    if (value === null || typeof value !== 'object') return value;
    if (!reads.has(value)) reads.set(value, new Set());
    return new Proxy(value, {
      get(target, key, receiver) {
        if (typeof key === 'string') reads.get(target)!.add(key);
        return wrap(Reflect.get(target, key, receiver));
      },
    });
  };
  return { proxy: wrap(root) as object, reads };
}

/** Fields of objects the validator looked into (it reads every field its schema defines) that it never read. */
function unknownFields(value: unknown, reads: WeakMap<object, Set<string>>, at = ''): string[] {
  if (value === null || typeof value !== 'object') return [];
  if (Array.isArray(value)) return value.flatMap((item, i) => unknownFields(item, reads, `${at}/${i}`));
  const read = reads.get(value);
  const found: string[] = [];
  for (const [key, child] of Object.entries(value)) {
    if (read && read.size > 0 && !read.has(key)) found.push(`${at}/${key}`);
    found.push(...unknownFields(child, reads, `${at}/${key}`));
  }
  return found;
}
