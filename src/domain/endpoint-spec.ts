/**
 * The specification of one endpoint version, its defaults, and the rules that
 * create and update requests must follow. REST bodies are read here as they
 * arrive (the `advanced` object keeps the documented snake_case keys); the
 * GraphQL surface converts its input to the same shape first, so every rule
 * exists once.
 */
import { FieldChecker, isObject } from './field-checker.js';
import { describeInstanceOption, findInstanceOption, INSTANCE_OPTIONS } from './instance-catalog.js';
import { invalidArgument, ok, fail, type Result } from './result.js';

export interface AutoscalingPolicy {
  minReplica: number;
  maxReplica: number;
  /** Seconds without a request before scaling down. */
  cooldownPeriod: number;
}

export interface AdvancedConfig {
  tokenizerSkipSpecialTokens: boolean;
  tokenizerAddSpecialTokens: boolean;
  maxBatchSize: number;
  maxTokenCount: number;
  maxInputLength: number;
  enableContentLogging: boolean;
  /**
   * max_token_count was left out: it follows the model (its context, bounded
   * by the instance's memory), resolved when a replica first reads the model;
   * until then maxTokenCount holds the 4096 placeholder. Absent: given.
   */
  maxTokenCountAuto?: boolean;
  /** max_input_length was left out: min(2048, max_token_count) as resolved. Absent: given. */
  maxInputLengthAuto?: boolean;
}

/** Where a version's model comes from: a hub repository, or a W&B registry artifact. */
export type ModelSource = { source: 'hf'; repo: string; revision: string | null } | { source: 'wandb'; artifact: string };

/** Everything a version fixes about an endpoint. */
export interface EndpointSpec {
  name: string;
  instanceId: string;
  model: ModelSource;
  autoscaling: AutoscalingPolicy;
  advanced: AdvancedConfig;
}

/** The hub repository and revision of a spec, for the surfaces that name them (null for an artifact). */
export function hubModelOf(spec: EndpointSpec): { repo: string | null; revision: string | null } {
  return spec.model.source === 'hf' ? { repo: spec.model.repo, revision: spec.model.revision } : { repo: null, revision: null };
}

/**
 * Whether replicas started for spec `a` serve spec `b` as they are: the same model, instance and
 * engine settings. What only the gateway or the controller reads (the name, the autoscaling
 * policy, content logging) may differ: a version that changes only those is rolled out by
 * handing the running replicas to it, not by replacing them.
 */
export function servesAlike(a: EndpointSpec, b: EndpointSpec): boolean {
  const engineSide = ({ model, instanceId, advanced: { enableContentLogging: _logging, ...advanced } }: EndpointSpec) =>
    JSON.stringify({ model, instanceId, advanced: Object.fromEntries(Object.entries(advanced).sort(([x], [y]) => x.localeCompare(y))) });
  return engineSide(a) === engineSide(b);
}

export const LIMITS = {
  maxReplicas: 10,
  maxCooldownSeconds: 7 * 24 * 3600,
  maxBatchSize: 1024,
  maxTokens: 1 << 20,
  nameLength: 128,
  commentLength: 1000,
  revisionLength: 255,
} as const;

export const DEFAULT_AUTOSCALING: AutoscalingPolicy = { minReplica: 0, maxReplica: 1, cooldownPeriod: 300 };

export const DEFAULT_ADVANCED: AdvancedConfig = {
  tokenizerSkipSpecialTokens: true,
  tokenizerAddSpecialTokens: false,
  maxBatchSize: 8,
  maxTokenCount: 4096,
  maxInputLength: 2048,
  enableContentLogging: false,
};

/** The documented snake_case keys of `advanced`, and the spec field each sets. */
export const ADVANCED_KEYS = {
  tokenizer_skip_special_tokens: 'tokenizerSkipSpecialTokens',
  tokenizer_add_special_tokens: 'tokenizerAddSpecialTokens',
  max_batch_size: 'maxBatchSize',
  max_token_count: 'maxTokenCount',
  enable_content_logging: 'enableContentLogging',
  max_input_length: 'maxInputLength',
} as const satisfies Record<string, keyof AdvancedConfig>;

// Hub repository ids: `name` or `owner/name`, letters, digits, '-', '_', '.', at most 96 each.
const REPO_PART = '[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9_])?';
const HF_REPO_PATTERN = new RegExp(`^(?:${REPO_PART}/)?${REPO_PART}$`);
/** Git's own rules for a ref name, in part: no spaces or `~^:?*[\`, no `..`, no leading `.` (a `..` would also be a URL's dot segment). */
const REVISION_PATTERN = /^(?!\.)(?!.*\.\.)[^\s~^:?*[\\]+$/;

export interface CreateEndpointInput {
  projectId: string;
  comment: string | null;
  spec: EndpointSpec;
}

export interface UpdateEndpointInput {
  comment: string | null;
  /** Applies the requested changes to the current spec, checking the merged result. */
  apply(current: EndpointSpec): Result<EndpointSpec>;
}

function readName(check: FieldChecker, body: Record<string, unknown>, required: boolean): string | undefined {
  const name = check.string(body, 'name', { required, maxLength: LIMITS.nameLength });
  return name?.trim();
}

function readInstance(check: FieldChecker, body: Record<string, unknown>, required: boolean): string | undefined {
  const id = check.string(body, 'instanceOptionId', { required, maxLength: 64 });
  if (id !== undefined && !findInstanceOption(id)) {
    check.fail('instanceOptionId', `must be one of the instance option ids: ${INSTANCE_OPTIONS.map(describeInstanceOption).join(', ')}`);
    return undefined;
  }
  return id;
}

function readRepo(check: FieldChecker, body: Record<string, unknown>, required: boolean): string | undefined {
  return check.string(body, 'hfModelRepo', {
    required,
    maxLength: 193,
    pattern: HF_REPO_PATTERN,
    patternRule: "must be a model id such as 'org/model' (letters, digits, '-', '_', '.')",
  });
}

function readRevision(check: FieldChecker, body: Record<string, unknown>): string | undefined {
  return check.string(body, 'hfModelRepoRevision', {
    maxLength: LIMITS.revisionLength,
    pattern: REVISION_PATTERN,
    patternRule: 'must be a branch, tag or commit hash (no spaces, no "..", not starting with ".")',
  });
}

function readComment(check: FieldChecker, body: Record<string, unknown>, field: string): string | null {
  return check.text(body, field, { maxLength: LIMITS.commentLength }) ?? null;
}

type PartialPolicy = Partial<AutoscalingPolicy>;

/** Reads `autoscalingPolicy` or `simplescale`; the two are alternatives. */
export function readScaling(check: FieldChecker, body: Record<string, unknown>): PartialPolicy | undefined {
  const policy = check.object(body, 'autoscalingPolicy');
  const simple = check.object(body, 'simplescale');
  if (policy && simple) {
    check.fail('simplescale', 'cannot be given together with autoscalingPolicy');
    return undefined;
  }
  if (simple) {
    const c = check.nested('simplescale');
    c.onlyKnown(simple, ['replicas']);
    const replicas = c.integer(simple, 'replicas', { required: true, min: 0, max: LIMITS.maxReplicas });
    return replicas === undefined ? undefined : { minReplica: replicas, maxReplica: replicas };
  }
  if (!policy) return undefined;
  const c = check.nested('autoscalingPolicy');
  c.onlyKnown(policy, ['minReplica', 'maxReplica', 'cooldownPeriod']);
  const out: PartialPolicy = {};
  const min = c.integer(policy, 'minReplica', { min: 0, max: LIMITS.maxReplicas });
  const max = c.integer(policy, 'maxReplica', { min: 0, max: LIMITS.maxReplicas });
  const cooldown = c.integer(policy, 'cooldownPeriod', { min: 0, max: LIMITS.maxCooldownSeconds });
  if (min !== undefined) out.minReplica = min;
  if (max !== undefined) out.maxReplica = max;
  if (cooldown !== undefined) out.cooldownPeriod = cooldown;
  return out;
}

function readAdvanced(check: FieldChecker, body: Record<string, unknown>, required: boolean): Partial<AdvancedConfig> | undefined {
  const raw = check.object(body, 'advanced', { required });
  if (!raw) return undefined;
  const c = check.nested('advanced');
  c.onlyKnown(raw, Object.keys(ADVANCED_KEYS));
  const out: Partial<AdvancedConfig> = {};
  const set = <K extends keyof AdvancedConfig>(key: K, value: AdvancedConfig[K] | undefined) => {
    if (value !== undefined) out[key] = value;
  };
  set('tokenizerSkipSpecialTokens', c.boolean(raw, 'tokenizer_skip_special_tokens'));
  set('tokenizerAddSpecialTokens', c.boolean(raw, 'tokenizer_add_special_tokens'));
  set('enableContentLogging', c.boolean(raw, 'enable_content_logging'));
  set('maxBatchSize', c.integer(raw, 'max_batch_size', { min: 1, max: LIMITS.maxBatchSize }));
  set('maxTokenCount', c.integer(raw, 'max_token_count', { min: 1, max: LIMITS.maxTokens }));
  set('maxInputLength', c.integer(raw, 'max_input_length', { min: 1, max: LIMITS.maxTokens }));
  // A limit given is fixed from now on; one left out keeps following the model.
  if (out.maxTokenCount !== undefined) out.maxTokenCountAuto = false;
  if (out.maxInputLength !== undefined) out.maxInputLengthAuto = false;
  return out;
}

/** An input limit that was left out follows a changed total limit: min(2048, max_token_count). */
function withInputFollowing(advanced: AdvancedConfig): AdvancedConfig {
  if (!advanced.maxInputLengthAuto) return advanced;
  return { ...advanced, maxInputLength: Math.min(DEFAULT_ADVANCED.maxInputLength, advanced.maxTokenCount) };
}

/** Rules that involve several fields, checked on the merged spec and reported against the request's field names. */
export function checkConsistency(check: FieldChecker, spec: EndpointSpec): void {
  const { autoscaling, advanced } = spec;
  if (autoscaling.minReplica > autoscaling.maxReplica) {
    check.fail('autoscalingPolicy.minReplica', `must not exceed maxReplica (${autoscaling.minReplica} > ${autoscaling.maxReplica})`);
  }
  // While max_token_count follows the model, its value is a placeholder (4096) until a start reads the model's
  // context, or the context of the model a previous version ran: the first start checks max_input_length against
  // the context it reads, and fails with WORKLOAD_INIT_SETTINGS_ERROR if it is larger (src/models/token-limits.ts).
  if (!advanced.maxTokenCountAuto && advanced.maxInputLength > advanced.maxTokenCount) {
    check.fail('advanced.max_input_length', `must not exceed max_token_count (${advanced.maxInputLength} > ${advanced.maxTokenCount})`);
  }
}

function notAnObject(): Result<never> {
  return fail(invalidArgument([{ field: 'body', message: 'must be a JSON object' }]));
}

export const CREATE_FIELDS = [
  'projectId',
  'name',
  'instanceOptionId',
  'advanced',
  'hfModelRepo',
  'autoscalingPolicy',
  'simplescale',
  'hfModelRepoRevision',
  'initialVersionComment',
] as const;

export function parseCreateEndpoint(body: unknown): Result<CreateEndpointInput> {
  if (!isObject(body)) return notAnObject();
  const check = new FieldChecker();
  check.onlyKnown(body, CREATE_FIELDS);
  const projectId = check.string(body, 'projectId', { required: true, maxLength: 64 });
  const name = readName(check, body, true);
  const instanceId = readInstance(check, body, true);
  const advanced = readAdvanced(check, body, true);
  const hfModelRepo = readRepo(check, body, true);
  const scaling = readScaling(check, body);
  const revision = readRevision(check, body);
  const comment = readComment(check, body, 'initialVersionComment');
  if (check.violations.length > 0) return fail(invalidArgument(check.violations));

  const maxTokenCount = advanced?.maxTokenCount ?? DEFAULT_ADVANCED.maxTokenCount;
  const spec: EndpointSpec = {
    name: name!,
    instanceId: instanceId!,
    model: { source: 'hf', repo: hfModelRepo!, revision: revision ?? null },
    autoscaling: { ...DEFAULT_AUTOSCALING, ...scaling },
    advanced: {
      ...DEFAULT_ADVANCED,
      // Limits left out follow the model (resolved at the first start).
      maxTokenCountAuto: true,
      maxInputLengthAuto: true,
      // An unset input limit follows a smaller total limit down.
      maxInputLength: Math.min(DEFAULT_ADVANCED.maxInputLength, maxTokenCount),
      ...advanced,
    },
  };
  checkConsistency(check, spec);
  if (check.violations.length > 0) return fail(invalidArgument(check.violations));
  return ok({ projectId: projectId!, comment, spec });
}

export const UPDATE_FIELDS = [
  'name',
  'advanced',
  'autoscalingPolicy',
  'simplescale',
  'hfModelRepo',
  'hfModelRepoRevision',
  'newVersionComment',
  'instanceOptionId',
] as const;

export function parseUpdateEndpoint(body: unknown): Result<UpdateEndpointInput> {
  if (!isObject(body)) return notAnObject();
  const check = new FieldChecker();
  check.onlyKnown(body, UPDATE_FIELDS);
  const name = readName(check, body, false);
  const instanceId = readInstance(check, body, false);
  const advanced = readAdvanced(check, body, false);
  const hfModelRepo = readRepo(check, body, false);
  const scaling = readScaling(check, body);
  const revision = readRevision(check, body);
  const clearsRevision = body.hfModelRepoRevision === null;
  const comment = readComment(check, body, 'newVersionComment');
  if (check.violations.length > 0) return fail(invalidArgument(check.violations));

  return ok({
    comment,
    apply(current: EndpointSpec): Result<EndpointSpec> {
      const merged = new FieldChecker();
      let model = current.model;
      if (hfModelRepo !== undefined) {
        // A new model without a revision means the new model's default branch.
        const same = current.model.source === 'hf' && current.model.repo === hfModelRepo;
        const keptRevision = same && !clearsRevision && current.model.source === 'hf' ? current.model.revision : null;
        model = { source: 'hf', repo: hfModelRepo, revision: revision ?? keptRevision };
      } else if (current.model.source === 'hf') {
        if (revision !== undefined || clearsRevision) model = { ...current.model, revision: revision ?? null };
      } else if (revision !== undefined) {
        merged.fail('hfModelRepoRevision', 'needs hfModelRepo: this endpoint serves a W&B registry artifact');
      }
      const next: EndpointSpec = {
        name: name ?? current.name,
        instanceId: instanceId ?? current.instanceId,
        model,
        autoscaling: { ...current.autoscaling, ...scaling },
        advanced: withInputFollowing({ ...current.advanced, ...advanced }),
      };
      checkConsistency(merged, next);
      return merged.violations.length > 0 ? fail(invalidArgument(merged.violations)) : ok(next);
    },
  });
}
