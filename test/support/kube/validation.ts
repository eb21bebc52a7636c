/**
 * Validation of the objects the stand-in stores, with the rules and the messages of kube-apiserver: DNS-1123 names,
 * label keys and values, and the parts of a PodSpec a runtime writes (containers, env, ports, probes, volumes,
 * resources, tolerations, security contexts: security-context.ts). A violation becomes a 422 `Invalid` Status whose `details.causes` list every field.
 */
import { invalid, parseQuantity, type KubeObject, type StatusCause } from './objects.js';
import { validateContainerSecurityContext, validatePodSecurityContext } from './security-context.js';

const SUBDOMAIN_MSG =
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_MSG =
  "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const NAME_PART_MSG =
  "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MSG =
  "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const ENV_NAME_MSG =
  "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')";
const KEY_MSG =
  "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

const SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const NAME_PART = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const PORT_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

export function subdomainError(name: string): string | undefined {
  if (name.length > 253) return 'must be no more than 253 characters';
  return SUBDOMAIN.test(name) ? undefined : SUBDOMAIN_MSG;
}

export function dnsLabelError(name: string): string | undefined {
  if (name.length > 63) return 'must be no more than 63 characters';
  return DNS_LABEL.test(name) ? undefined : LABEL_MSG;
}

/** A label or annotation key: an optional DNS subdomain prefix and `/`, then a name part of at most 63 characters. */
export function qualifiedNameError(key: string): string | undefined {
  const parts = key.split('/');
  if (parts.length > 2) return NAME_PART_MSG;
  const name = parts[parts.length - 1]!;
  if (parts.length === 2) {
    if (parts[0] === '') return 'prefix part must be non-empty';
    const prefix = subdomainError(parts[0]!);
    if (prefix) return `prefix part ${prefix}`;
  }
  if (name === '') return 'name part must be non-empty';
  if (name.length > 63) return 'name part must be no more than 63 characters';
  return NAME_PART.test(name) ? undefined : NAME_PART_MSG;
}

export function labelValueError(value: string): string | undefined {
  if (value.length > 63) return 'must be no more than 63 characters';
  return value === '' || NAME_PART.test(value) ? undefined : LABEL_VALUE_MSG;
}

/** Collects causes for one object; `fail()` throws the 422 when there are any. */
export class Causes {
  readonly list: StatusCause[] = [];
  invalid(field: string, value: unknown, detail: string): void {
    this.list.push({ reason: 'FieldValueInvalid', message: `Invalid value: ${JSON.stringify(value)}: ${detail}`, field });
  }
  required(field: string, detail?: string): void {
    this.list.push({ reason: 'FieldValueRequired', message: detail ? `Required value: ${detail}` : 'Required value', field });
  }
  duplicate(field: string, value: unknown): void {
    this.list.push({ reason: 'FieldValueDuplicate', message: `Duplicate value: ${JSON.stringify(value)}`, field });
  }
  notFound(field: string, value: unknown): void {
    this.list.push({ reason: 'FieldValueNotFound', message: `Not found: ${JSON.stringify(value)}`, field });
  }
  notSupported(field: string, value: unknown, supported: string[]): void {
    const list = supported.map((s) => JSON.stringify(s)).join(', ');
    this.list.push({
      reason: 'FieldValueNotSupported',
      message: `Unsupported value: ${JSON.stringify(value)}: supported values: ${list}`,
      field,
    });
  }
  forbidden(field: string, detail: string): void {
    this.list.push({ reason: 'FieldValueForbidden', message: `Forbidden: ${detail}`, field });
  }
  fail(kind: string, name: string): void {
    if (this.list.length > 0) throw invalid(kind, name, this.list);
  }
}

/** metadata.name (or generateName), labels and annotation keys. */
export function validateMetadata(
  object: KubeObject,
  causes: Causes,
  nameCheck: (name: string) => string | undefined = subdomainError,
): void {
  const meta = object.metadata;
  if (!meta.name) causes.required('metadata.name', 'name or generateName is required');
  else {
    const error = nameCheck(meta.name);
    if (error) causes.invalid('metadata.name', meta.name, error);
  }
  for (const [key, value] of Object.entries(meta.labels ?? {})) {
    const keyError = qualifiedNameError(key);
    if (keyError) causes.invalid('metadata.labels', key, keyError);
    const valueError = typeof value === 'string' ? labelValueError(value) : 'must be a string';
    if (valueError) causes.invalid('metadata.labels', value, valueError);
  }
  for (const key of Object.keys(meta.annotations ?? {})) {
    const keyError = qualifiedNameError(key.toLowerCase());
    if (keyError) causes.invalid('metadata.annotations', key, keyError);
  }
  for (const [i, ref] of (meta.ownerReferences ?? []).entries()) {
    for (const field of ['apiVersion', 'kind', 'name', 'uid'])
      if (!ref?.[field]) causes.required(`metadata.ownerReferences[${i}].${field}`);
  }
}

/** Secret and ConfigMap keys. */
export function validateDataKeys(field: string, data: Record<string, unknown> | undefined, causes: Causes): void {
  for (const key of Object.keys(data ?? {})) {
    if (!/^[-._a-zA-Z0-9]+$/.test(key) || key.length > 253) causes.invalid(`${field}`, key, KEY_MSG);
  }
}

const FIELD_REFS = [
  'metadata.name',
  'metadata.namespace',
  'metadata.uid',
  'spec.nodeName',
  'spec.serviceAccountName',
  'status.hostIP',
  'status.hostIPs',
  'status.podIP',
  'status.podIPs',
];

function validateEnv(container: any, path: string, causes: Causes): void {
  for (const [i, env] of (container.env ?? []).entries()) {
    const at = `${path}.env[${i}]`;
    if (!env?.name) causes.required(`${at}.name`);
    else if (!/^[-._a-zA-Z][-._a-zA-Z0-9]*$/.test(env.name)) causes.invalid(`${at}.name`, env.name, ENV_NAME_MSG);
    const from = env?.valueFrom;
    if (!from) continue;
    if (env.value) causes.invalid(`${at}.valueFrom`, '', 'may not be specified when `value` is not empty');
    const sources = ['fieldRef', 'resourceFieldRef', 'configMapKeyRef', 'secretKeyRef'].filter((s) => from[s] != null);
    if (sources.length !== 1) causes.invalid(`${at}.valueFrom`, '', 'may not have more than one field specified at a time');
    if (from.fieldRef) {
      const fieldPath: string = from.fieldRef.fieldPath ?? '';
      if (!fieldPath) causes.required(`${at}.valueFrom.fieldRef.fieldPath`);
      else if (!FIELD_REFS.includes(fieldPath) && !/^metadata\.(labels|annotations)\['[^']+'\]$/.test(fieldPath))
        causes.notSupported(`${at}.valueFrom.fieldRef.fieldPath`, fieldPath, FIELD_REFS);
    }
    for (const ref of ['secretKeyRef', 'configMapKeyRef'] as const) {
      if (!from[ref]) continue;
      if (!from[ref].name) causes.required(`${at}.valueFrom.${ref}.name`);
      if (!from[ref].key) causes.required(`${at}.valueFrom.${ref}.key`);
    }
  }
  for (const [i, source] of (container.envFrom ?? []).entries()) {
    const ref = source?.secretRef ?? source?.configMapRef;
    if (!ref) causes.invalid(`${path}.envFrom[${i}]`, '', 'must specify one of: `configMapRef` or `secretRef`');
    else if (!ref.name) causes.required(`${path}.envFrom[${i}].${source.secretRef ? 'secretRef' : 'configMapRef'}.name`);
  }
}

/** A port number, or a port name (IANA_SVC_NAME: the kubelet resolves it against the container's ports later). */
function validatePort(value: unknown, field: string, causes: Causes): void {
  if (typeof value === 'number') {
    if (!Number.isInteger(value) || value < 1 || value > 65535) causes.invalid(field, value, 'must be between 1 and 65535, inclusive');
  } else if (typeof value !== 'string' || value.length > 15 || !PORT_NAME.test(value) || !/[a-z]/.test(value)) {
    causes.invalid(field, value, 'must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)');
  }
}

function validateProbe(probe: any, path: string, causes: Causes): void {
  if (probe == null) return;
  const handlers = ['exec', 'httpGet', 'tcpSocket', 'grpc'].filter((h) => probe[h] != null);
  if (handlers.length !== 1) causes.required(path, 'must specify a handler type');
  if (probe.httpGet) validatePort(probe.httpGet.port, `${path}.httpGet.port`, causes);
  for (const field of ['periodSeconds', 'timeoutSeconds', 'successThreshold', 'failureThreshold']) {
    if (probe[field] != null && !(Number.isInteger(probe[field]) && probe[field] >= 1))
      causes.invalid(`${path}.${field}`, probe[field], 'must be greater than or equal to 1');
  }
}

function validateResources(resources: any, path: string, causes: Causes): void {
  const limits: Record<string, unknown> = resources?.limits ?? {};
  const requests: Record<string, unknown> = resources?.requests ?? {};
  for (const [kind, list] of [
    ['limits', limits],
    ['requests', requests],
  ] as const) {
    for (const [name, value] of Object.entries(list)) {
      const amount = parseQuantity(value);
      if (amount === undefined) causes.invalid(`${path}.${kind}[${name}]`, value, 'quantities must match the regular expression');
      else if (amount < 0) causes.invalid(`${path}.${kind}[${name}]`, value, 'must be greater than or equal to 0');
      else if (name.includes('/') && !name.startsWith('kubernetes.io/') && !Number.isInteger(amount))
        causes.invalid(`${path}.${kind}[${name}]`, value, 'must be an integer');
    }
  }
  for (const [name, value] of Object.entries(requests)) {
    const request = parseQuantity(value) ?? 0;
    const limit = limits[name] === undefined ? undefined : (parseQuantity(limits[name]) ?? 0);
    const extended = name.includes('/') && !name.startsWith('kubernetes.io/');
    if (extended && limit === undefined) causes.forbidden(`${path}.limits`, 'Limit must be set for non overcommitable resources');
    else if (extended && limit !== request) causes.invalid(`${path}.requests`, value, `must be equal to ${name} limit of ${limits[name]}`);
    else if (limit !== undefined && request > limit)
      causes.invalid(`${path}.requests`, value, `must be less than or equal to ${name} limit of ${limits[name]}`);
  }
}

function validateContainer(container: any, path: string, volumes: Set<string>, causes: Causes): void {
  if (!container?.image) causes.required(`${path}.image`);
  const portNames = new Set<string>();
  for (const [i, port] of (container.ports ?? []).entries()) {
    validatePort(port?.containerPort, `${path}.ports[${i}].containerPort`, causes);
    if (port?.name) {
      validatePort(port.name, `${path}.ports[${i}].name`, causes);
      if (portNames.has(port.name)) causes.duplicate(`${path}.ports[${i}].name`, port.name);
      portNames.add(port.name);
    }
    if (port?.protocol && !['TCP', 'UDP', 'SCTP'].includes(port.protocol))
      causes.notSupported(`${path}.ports[${i}].protocol`, port.protocol, ['SCTP', 'TCP', 'UDP']);
  }
  validateEnv(container, path, causes);
  validateContainerSecurityContext(container.securityContext, path, causes);
  validateResources(container.resources, `${path}.resources`, causes);
  for (const probe of ['readinessProbe', 'livenessProbe', 'startupProbe']) validateProbe(container[probe], `${path}.${probe}`, causes);
  const mountPaths = new Set<string>();
  for (const [i, mount] of (container.volumeMounts ?? []).entries()) {
    if (!mount?.name) causes.required(`${path}.volumeMounts[${i}].name`);
    else if (!volumes.has(mount.name)) causes.notFound(`${path}.volumeMounts[${i}].name`, mount.name);
    if (!mount?.mountPath) causes.required(`${path}.volumeMounts[${i}].mountPath`);
    else if (mountPaths.has(mount.mountPath)) causes.invalid(`${path}.volumeMounts[${i}].mountPath`, mount.mountPath, 'must be unique');
    mountPaths.add(mount?.mountPath);
  }
  if (container.terminationMessagePolicy && !['File', 'FallbackToLogsOnError'].includes(container.terminationMessagePolicy))
    causes.notSupported(`${path}.terminationMessagePolicy`, container.terminationMessagePolicy, ['FallbackToLogsOnError', 'File']);
  if (container.imagePullPolicy && !['Always', 'IfNotPresent', 'Never'].includes(container.imagePullPolicy))
    causes.notSupported(`${path}.imagePullPolicy`, container.imagePullPolicy, ['Always', 'IfNotPresent', 'Never']);
}

const VOLUME_SOURCES = [
  'emptyDir',
  'hostPath',
  'persistentVolumeClaim',
  'secret',
  'configMap',
  'projected',
  'downwardAPI',
  'ephemeral',
  'nfs',
  'csi',
];

/** A defaulted Pod, as the API server validates it on create. */
export function validatePod(pod: KubeObject): void {
  const causes = new Causes();
  validateMetadata(pod, causes);
  const spec = pod.spec ?? {};
  const volumes = new Set<string>();
  for (const [i, volume] of (spec.volumes ?? []).entries()) {
    const field = `spec.volumes[${i}]`;
    if (!volume?.name) causes.required(`${field}.name`);
    else {
      const error = dnsLabelError(volume.name);
      if (error) causes.invalid(`${field}.name`, volume.name, error);
      if (volumes.has(volume.name)) causes.duplicate(`${field}.name`, volume.name);
      volumes.add(volume.name);
    }
    const sources = VOLUME_SOURCES.filter((s) => volume?.[s] != null);
    if (sources.length === 0) causes.required(field, 'must specify a volume type');
    else if (sources.length > 1) causes.forbidden(`${field}.${sources[1]}`, 'may not specify more than 1 volume type');
    if (volume?.hostPath && !volume.hostPath.path) causes.required(`${field}.hostPath.path`);
    if (volume?.persistentVolumeClaim && !volume.persistentVolumeClaim.claimName)
      causes.required(`${field}.persistentVolumeClaim.claimName`);
  }
  if (!Array.isArray(spec.containers) || spec.containers.length === 0) causes.required('spec.containers');
  const names = new Set<string>();
  for (const list of ['initContainers', 'containers'] as const) {
    for (const [i, container] of (spec[list] ?? []).entries()) {
      const path = `spec.${list}[${i}]`;
      if (!container?.name) causes.required(`${path}.name`);
      else {
        const error = dnsLabelError(container.name);
        if (error) causes.invalid(`${path}.name`, container.name, error);
        if (names.has(container.name)) causes.duplicate(`${path}.name`, container.name);
        names.add(container.name);
      }
      validateContainer(container ?? {}, path, volumes, causes);
      if (list === 'initContainers' && container?.readinessProbe && container.restartPolicy !== 'Always')
        causes.invalid(`${path}.readinessProbe`, '', 'may not be set for init containers without restartPolicy=Always');
    }
  }
  validatePodSecurityContext(spec.securityContext, causes);
  if (!['Always', 'OnFailure', 'Never'].includes(spec.restartPolicy))
    causes.notSupported('spec.restartPolicy', spec.restartPolicy, ['Always', 'Never', 'OnFailure']);
  if (
    spec.terminationGracePeriodSeconds != null &&
    !(Number.isInteger(spec.terminationGracePeriodSeconds) && spec.terminationGracePeriodSeconds >= 0)
  )
    causes.invalid('spec.terminationGracePeriodSeconds', spec.terminationGracePeriodSeconds, 'must be greater than or equal to 0');
  for (const [key, value] of Object.entries(spec.nodeSelector ?? {})) {
    const error = qualifiedNameError(key) ?? (typeof value === 'string' ? labelValueError(value) : 'must be a string');
    if (error) causes.invalid('spec.nodeSelector', key, error);
  }
  for (const [i, toleration] of (spec.tolerations ?? []).entries()) {
    const path = `spec.tolerations[${i}]`;
    if (toleration?.operator && !['Exists', 'Equal'].includes(toleration.operator))
      causes.notSupported(`${path}.operator`, toleration.operator, ['Equal', 'Exists']);
    if (toleration?.operator === 'Exists' && toleration.value)
      causes.invalid(`${path}.operator`, toleration.value, "value must be empty when `operator` is 'Exists'");
    if (!toleration?.key && toleration?.operator !== 'Exists')
      causes.invalid(
        `${path}.operator`,
        toleration?.operator ?? '',
        'operator must be Exists when `key` is empty, which means "match all values and all keys"',
      );
    if (toleration?.effect && !['NoSchedule', 'PreferNoSchedule', 'NoExecute'].includes(toleration.effect))
      causes.notSupported(`${path}.effect`, toleration.effect, ['NoExecute', 'NoSchedule', 'PreferNoSchedule']);
  }
  causes.fail('Pod', pod.metadata.name ?? '');
}
