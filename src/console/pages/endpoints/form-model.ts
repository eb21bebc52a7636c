/**
 * The endpoint form's values, the request bodies they make, and their checks.
 * The checks are the server's own rules (src/domain): the form builds the same
 * REST-shaped body the GraphQL resolvers hand to the parsers (snake_case
 * `advanced`), runs the parsers on it, and maps each violation's field path
 * back to the form field it came from. The GraphQL input is then the same
 * body with `advanced` in camelCase, so what passes here is what the server
 * reads.
 */
import { parseCreateEndpoint, parseUpdateEndpoint, DEFAULT_ADVANCED, type EndpointSpec } from '../../../domain/endpoint-spec.js';
import { artifactSpec, parseArtifactCreate } from '../../../domain/artifact-request.js';
import type { FieldViolation } from '../../../domain/result.js';
import type {
  ArtifactEndpointInput,
  CreateEndpointInput,
  EndpointsEditableQuery,
  GpuType,
  UpdateEndpointInput,
} from '../../api/generated.js';

export interface FormValues {
  projectId: string;
  source: 'hf' | 'wandb';
  name: string;
  repo: string;
  revision: string;
  artifact: string;
  instanceId: string;
  minReplica: string;
  maxReplica: string;
  cooldown: string;
  maxBatchSize: string;
  maxTokenCount: string;
  maxInputLength: string;
  skipSpecialTokens: boolean;
  addSpecialTokens: boolean;
  contentLogging: boolean;
  comment: string;
}

export type FieldKey = Exclude<keyof FormValues, 'source'>;
export type FieldErrors = Partial<Record<FieldKey, string>>;

/** The form's fields in page order: the first with an error gets the focus. */
export const ADVANCED_FIELDS: FieldKey[] = [
  'maxBatchSize',
  'maxTokenCount',
  'maxInputLength',
  'skipSpecialTokens',
  'addSpecialTokens',
  'contentLogging',
];

export const FIELD_ORDER: FieldKey[] = [
  'projectId',
  'name',
  'repo',
  'revision',
  'artifact',
  'instanceId',
  'minReplica',
  'maxReplica',
  'cooldown',
  ...ADVANCED_FIELDS,
  'comment',
];

export function blankValues(projectId: string, instanceId: string): FormValues {
  return {
    projectId,
    source: 'hf',
    name: '',
    repo: '',
    revision: '',
    artifact: '',
    instanceId,
    minReplica: '0',
    maxReplica: '1',
    cooldown: '300',
    maxBatchSize: '',
    maxTokenCount: '',
    maxInputLength: '',
    skipSpecialTokens: DEFAULT_ADVANCED.tokenizerSkipSpecialTokens,
    addSpecialTokens: DEFAULT_ADVANCED.tokenizerAddSpecialTokens,
    contentLogging: DEFAULT_ADVANCED.enableContentLogging,
    comment: '',
  };
}

type EditableEndpoint = NonNullable<EndpointsEditableQuery['endpoint']>;
type EditableSpec = EditableEndpoint['currentVersion']['spec'];

/** The form prefilled from an endpoint's current version. */
export function valuesOf(endpoint: EditableEndpoint): FormValues {
  const spec = endpoint.currentVersion.spec;
  return {
    projectId: endpoint.project.id,
    source: spec.wandbArtifact ? 'wandb' : 'hf',
    name: spec.name,
    repo: spec.hfModelRepo ?? '',
    revision: spec.hfModelRepoRevision ?? '',
    artifact: spec.wandbArtifact?.name ?? '',
    instanceId: spec.instanceId,
    minReplica: String(spec.autoscalingMin),
    maxReplica: String(spec.autoscalingMax),
    cooldown: String(spec.autoscalingCooldown),
    maxBatchSize: String(spec.maxBatchSize),
    maxTokenCount: String(spec.maxTokenCount),
    maxInputLength: String(spec.maxInputLength),
    skipSpecialTokens: spec.tokenizerSkipSpecialTokens,
    addSpecialTokens: spec.tokenizerAddSpecialTokens,
    contentLogging: spec.enableContentLogging,
    comment: '',
  };
}

/**
 * The domain spec behind the GraphQL one, for the update rules that check the
 * merged result. Whether the input limit still follows the total limit is not
 * published: it is taken to follow when it equals what following gives.
 */
export function domainSpecOf(spec: EditableSpec): EndpointSpec {
  return {
    name: spec.name,
    instanceId: spec.instanceId,
    model: spec.wandbArtifact
      ? { source: 'wandb', artifact: spec.wandbArtifact.name }
      : { source: 'hf', repo: spec.hfModelRepo ?? '', revision: spec.hfModelRepoRevision },
    autoscaling: { minReplica: spec.autoscalingMin, maxReplica: spec.autoscalingMax, cooldownPeriod: spec.autoscalingCooldown },
    advanced: {
      tokenizerSkipSpecialTokens: spec.tokenizerSkipSpecialTokens,
      tokenizerAddSpecialTokens: spec.tokenizerAddSpecialTokens,
      maxBatchSize: spec.maxBatchSize,
      maxTokenCount: spec.maxTokenCount,
      maxInputLength: spec.maxInputLength,
      enableContentLogging: spec.enableContentLogging,
      maxInputLengthAuto: spec.maxInputLength === Math.min(DEFAULT_ADVANCED.maxInputLength, spec.maxTokenCount),
    },
  };
}

/** A number field as the rules read it: absent when empty, a number when it is one, else the text (which the rules refuse). */
function numberOf(text: string): number | string | undefined {
  const trimmed = text.trim();
  if (trimmed === '') return undefined;
  const value = Number(trimmed);
  return Number.isNaN(value) ? trimmed : value;
}

function compact(object: Record<string, unknown>): Record<string, unknown> | undefined {
  const entries = Object.entries(object).filter(([, v]) => v !== undefined);
  return entries.length > 0 ? Object.fromEntries(entries) : undefined;
}

const ADVANCED_KEYS: Array<[FieldKey, string]> = [
  ['maxBatchSize', 'max_batch_size'],
  ['maxTokenCount', 'max_token_count'],
  ['maxInputLength', 'max_input_length'],
  ['skipSpecialTokens', 'tokenizer_skip_special_tokens'],
  ['addSpecialTokens', 'tokenizer_add_special_tokens'],
  ['contentLogging', 'enable_content_logging'],
];

const SCALING_KEYS: Array<[FieldKey, string]> = [
  ['minReplica', 'minReplica'],
  ['maxReplica', 'maxReplica'],
  ['cooldown', 'cooldownPeriod'],
];

/** Which fields differ from the initial values (all of them when there are none). */
function changed(values: FormValues, initial: FormValues | undefined, key: FieldKey): boolean {
  return !initial || values[key] !== initial[key];
}

function fieldValue(values: FormValues, key: FieldKey): unknown {
  const value = values[key];
  return typeof value === 'boolean' ? value : numberOf(value);
}

function advancedBody(values: FormValues, initial?: FormValues): Record<string, unknown> | undefined {
  return compact(
    Object.fromEntries(ADVANCED_KEYS.map(([key, rest]) => [rest, changed(values, initial, key) ? fieldValue(values, key) : undefined])),
  );
}

function scalingBody(values: FormValues, initial?: FormValues): Record<string, unknown> | undefined {
  return compact(
    Object.fromEntries(SCALING_KEYS.map(([key, rest]) => [rest, changed(values, initial, key) ? fieldValue(values, key) : undefined])),
  );
}

const optionalText = (text: string) => (text.trim() === '' ? undefined : text);

/** POST /dedicated/endpoint's body, as createEndpoint's resolver hands it to the rules. */
export function createBody(values: FormValues): Record<string, unknown> {
  return compact({
    projectId: values.projectId,
    name: values.name,
    instanceOptionId: values.instanceId,
    hfModelRepo: values.repo,
    hfModelRepoRevision: optionalText(values.revision),
    advanced: advancedBody(values) ?? {},
    autoscalingPolicy: scalingBody(values),
    initialVersionComment: optionalText(values.comment),
  })!;
}

/** The artifact route's body; the instance option becomes its accelerator. */
export function artifactBody(values: FormValues, option: { gpuType: GpuType; numGpu: number } | undefined): Record<string, unknown> {
  return compact({
    wandbArtifactVersionName: values.artifact,
    name: optionalText(values.name),
    projectId: values.projectId,
    autoscalingPolicy: scalingBody(values),
    accelerator: option ? { type: option.gpuType, count: option.numGpu } : undefined,
  })!;
}

/** An update's body: only what changed from the current version (an empty number field leaves its value as it is). */
export function updateBody(values: FormValues, initial: FormValues): Record<string, unknown> {
  const body: Record<string, unknown> = {
    name: changed(values, initial, 'name') ? values.name : undefined,
    instanceOptionId: changed(values, initial, 'instanceId') ? values.instanceId : undefined,
    advanced: advancedBody(values, initial),
    autoscalingPolicy: scalingBody(values, initial),
    newVersionComment: optionalText(values.comment),
  };
  if (values.source === 'hf') {
    if (changed(values, initial, 'repo')) body.hfModelRepo = values.repo;
    if (changed(values, initial, 'revision')) body.hfModelRepoRevision = values.revision.trim() === '' ? null : values.revision;
  }
  return Object.fromEntries(Object.entries(body).filter(([, v]) => v !== undefined));
}

/** The GraphQL input for a REST-shaped body: the same fields, `advanced` in camelCase (the reverse of the resolvers' toRestBody). */
function graphqlInput(body: Record<string, unknown>): Record<string, unknown> {
  const input = { ...body };
  if (body.advanced && typeof body.advanced === 'object') {
    input.advanced = Object.fromEntries(
      Object.entries(body.advanced).map(([key, value]) => [key.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase()), value]),
    );
  }
  return input;
}

export const createInput = (body: Record<string, unknown>) => graphqlInput(body) as unknown as CreateEndpointInput;
export const artifactInput = (body: Record<string, unknown>) => graphqlInput(body) as unknown as ArtifactEndpointInput;
export const updateInput = (body: Record<string, unknown>) => graphqlInput(body) as unknown as UpdateEndpointInput;

/** The server's rules on a create body: its violations (none: it passes). */
export function checkCreate(body: Record<string, unknown>): FieldViolation[] {
  const parsed = parseCreateEndpoint(body);
  return parsed.type === 'error' && parsed.error.type === 'INVALID_ARGUMENT' ? parsed.error.fields : [];
}

export function checkArtifact(body: Record<string, unknown>): FieldViolation[] {
  const parsed = parseArtifactCreate(body);
  if (parsed.type === 'error') return parsed.error.type === 'INVALID_ARGUMENT' ? parsed.error.fields : [];
  const spec = artifactSpec(parsed.value, null);
  return spec.type === 'error' && spec.error.type === 'INVALID_ARGUMENT' ? spec.error.fields : [];
}

export function checkUpdate(body: Record<string, unknown>, current: EndpointSpec): FieldViolation[] {
  const parsed = parseUpdateEndpoint(body);
  if (parsed.type === 'error') return parsed.error.type === 'INVALID_ARGUMENT' ? parsed.error.fields : [];
  const merged = parsed.value.apply(current);
  return merged.type === 'error' && merged.error.type === 'INVALID_ARGUMENT' ? merged.error.fields : [];
}

const FIELD_OF: Record<string, FieldKey> = {
  projectId: 'projectId',
  name: 'name',
  instanceOptionId: 'instanceId',
  accelerator: 'instanceId',
  'accelerator.type': 'instanceId',
  'accelerator.count': 'instanceId',
  hfModelRepo: 'repo',
  hfModelRepoRevision: 'revision',
  wandbArtifactVersionName: 'artifact',
  autoscalingPolicy: 'minReplica',
  simplescale: 'minReplica',
  'autoscalingPolicy.minReplica': 'minReplica',
  'autoscalingPolicy.maxReplica': 'maxReplica',
  'autoscalingPolicy.cooldownPeriod': 'cooldown',
  advanced: 'maxBatchSize',
  'advanced.maxBatchSize': 'maxBatchSize',
  'advanced.maxTokenCount': 'maxTokenCount',
  'advanced.maxInputLength': 'maxInputLength',
  'advanced.tokenizerSkipSpecialTokens': 'skipSpecialTokens',
  'advanced.tokenizerAddSpecialTokens': 'addSpecialTokens',
  'advanced.enableContentLogging': 'contentLogging',
  initialVersionComment: 'comment',
  newVersionComment: 'comment',
};

/** The form field a violation's path names (REST snake_case or GraphQL camelCase, with or without `input.`), if any. */
export function fieldOf(path: string): FieldKey | undefined {
  const camel = path.replace(/^input\./, '').replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
  return FIELD_OF[camel];
}

/** Violations as errors beside the fields, and those no field shows (joined, for the alert). */
export function errorsOf(violations: ReadonlyArray<{ field: string; message: string }>): { fields: FieldErrors; rest: string[] } {
  const fields: FieldErrors = {};
  const rest: string[] = [];
  for (const { field, message } of violations) {
    const key = fieldOf(field);
    if (key) fields[key] = fields[key] ? `${fields[key]}; ${message}` : message;
    else rest.push(`${field} ${message}`);
  }
  return { fields, rest };
}
