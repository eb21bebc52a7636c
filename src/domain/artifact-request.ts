/**
 * The body of POST /dedicated/endpoint/wandb-artifact-create: which registry
 * artifact version to serve, and optionally where and how. Parsed here once
 * for the REST route and the GraphQL mutation.
 */
import { formatArtifactName, parseArtifactName, type ArtifactName } from './artifact-name.js';
import { FieldChecker, isObject } from './field-checker.js';
import { IDENTITY_NAME_MAX_LENGTH } from './identity.js';
import { GPU_COUNTS, GPU_TYPES, DEFAULT_INSTANCE_OPTION, instanceOptionFor, type GpuCount, type GpuType } from './instance-catalog.js';
import {
  checkConsistency,
  DEFAULT_ADVANCED,
  DEFAULT_AUTOSCALING,
  LIMITS,
  readScaling,
  type AutoscalingPolicy,
  type EndpointSpec,
} from './endpoint-spec.js';
import { fail, invalidArgument, ok, type Result } from './result.js';

export interface ArtifactCreateInput {
  artifact: ArtifactName;
  name: string | null;
  projectId: string | null;
  idempotencyKey: string | null;
  /** Only the policy fields given; defaults apply to a new endpoint, the current values to a rollout. */
  scaling: Partial<AutoscalingPolicy>;
  /** The instance option id when `accelerator` was given. */
  instanceId: string | null;
}

export const ARTIFACT_CREATE_FIELDS = [
  'wandbArtifactVersionName',
  'name',
  'projectId',
  'idempotencyKey',
  'autoscalingPolicy',
  'simplescale',
  'accelerator',
] as const;

export function parseArtifactCreate(body: unknown): Result<ArtifactCreateInput> {
  if (!isObject(body)) return fail(invalidArgument([{ field: 'body', message: 'must be a JSON object' }]));
  const check = new FieldChecker();
  check.onlyKnown(body, ARTIFACT_CREATE_FIELDS);
  const text = check.string(body, 'wandbArtifactVersionName', { required: true, maxLength: 520 });
  const parsedName = text === undefined ? undefined : parseArtifactName(text);
  if (parsedName?.type === 'error') check.fail('wandbArtifactVersionName', parsedName.error);
  const artifact = parsedName?.type === 'ok' ? parsedName.value : undefined;
  const name = check.string(body, 'name', { maxLength: LIMITS.nameLength });
  const projectId = check.string(body, 'projectId', { maxLength: 64 });
  const idempotencyKey = check.string(body, 'idempotencyKey', { maxLength: 256 });
  const scaling = readScaling(check, body) ?? {};
  let instanceId: string | null = null;
  const accelerator = check.object(body, 'accelerator');
  if (accelerator) {
    const c = check.nested('accelerator');
    c.onlyKnown(accelerator, ['type', 'count']);
    const type = c.string(accelerator, 'type', { maxLength: 16 });
    const count = c.integer(accelerator, 'count', { min: 1, max: 8 });
    const kind = (type ?? DEFAULT_INSTANCE_OPTION.gpuType).toUpperCase() as GpuType;
    if (type !== undefined && !GPU_TYPES.includes(kind)) c.fail('type', `must be one of ${GPU_TYPES.join(', ')}`);
    if (count !== undefined && !GPU_COUNTS.includes(count as GpuCount)) c.fail('count', `must be one of ${GPU_COUNTS.join(', ')}`);
    if (check.violations.length === 0) instanceId = instanceOptionFor(kind, (count ?? 1) as GpuCount).id;
  }
  if (idempotencyKey !== undefined && projectId === undefined) {
    check.fail('projectId', 'is required with idempotencyKey: the key names an endpoint within a project');
  }
  if (check.violations.length > 0) return fail(invalidArgument(check.violations));
  return ok({
    artifact: artifact!,
    name: name?.trim() ?? null,
    projectId: projectId ?? null,
    idempotencyKey: idempotencyKey ?? null,
    scaling,
    instanceId,
  });
}

/** A readable endpoint name for an artifact: `llama-3-8b-v3`. */
export function generatedName(artifact: ArtifactName): string {
  return `${artifact.name}-${artifact.version}`.slice(0, LIMITS.nameLength);
}

/** The project a call without `projectId` creates for the artifact: `registry/name`, cut to a project name's length. */
export function generatedProjectName(artifact: ArtifactName): string {
  return `${artifact.registry}/${artifact.name}`.slice(0, IDENTITY_NAME_MAX_LENGTH);
}

/**
 * The spec an artifact call asks for: a new endpoint's (defaults filled in) or
 * a rollout's (the current spec with the new artifact and the fields given),
 * checked against the cross-field rules.
 */
export function artifactSpec(input: ArtifactCreateInput, current: EndpointSpec | null): Result<EndpointSpec> {
  const spec: EndpointSpec = {
    name: input.name ?? current?.name ?? generatedName(input.artifact),
    instanceId: input.instanceId ?? current?.instanceId ?? DEFAULT_INSTANCE_OPTION.id,
    model: { source: 'wandb', artifact: formatArtifactName(input.artifact) },
    autoscaling: { ...(current?.autoscaling ?? DEFAULT_AUTOSCALING), ...input.scaling },
    // A new endpoint's token limits follow the model, as a hub endpoint's left out do (resolved at the first start).
    advanced: current?.advanced ?? { ...DEFAULT_ADVANCED, maxTokenCountAuto: true, maxInputLengthAuto: true },
  };
  const check = new FieldChecker();
  checkConsistency(check, spec);
  return check.violations.length > 0 ? fail(invalidArgument(check.violations)) : ok(spec);
}
