/**
 * The CLI's endpoint commands, each a call of the typed SDK (GraphQL) with
 * human output, or JSON with --json. Errors from the API come back as
 * CliError (one line, exit 1).
 */
import { ClientError, type GraphQLClient } from 'graphql-request';
import {
  CreateEndpointDocument,
  DeleteEndpointDocument,
  EndpointDocument,
  EndpointsDocument,
  EndpointVersionsDocument,
  MeDocument,
  RestartEndpointDocument,
  RollbackEndpointDocument,
  SleepEndpointDocument,
  TerminateEndpointDocument,
  UpdateEndpointDocument,
  WakeEndpointDocument,
  type AdvancedConfigInput,
  type AutoscalingPolicyInput,
  type EndpointFieldsFragment,
  type EndpointsQuery,
  type EndpointVersionsQuery,
} from '../../sdk/client.js';
import {
  describeInstanceOption,
  GPU_COUNTS,
  GPU_TYPES,
  INSTANCE_OPTIONS,
  instanceOptionFor,
  type GpuCount,
  type GpuType,
} from '../../domain/instance-catalog.js';
import { CliError, unwrap } from './errors.js';
import { graphqlClient } from './http.js';
import { describeStatus, forHumans, printEndpoint, statusColor, table, type Print } from './render.js';
import type { Settings } from './settings.js';

export interface Output {
  print: Print;
  json: boolean;
}

/** Flags shared by create and update: the spec's settings. */
export interface SpecFlags {
  name?: string;
  model?: string;
  revision?: string;
  instance?: string;
  /** A GPU kind and count, instead of the instance option's id. */
  gpu?: string;
  gpus?: number;
  maxBatchSize?: number;
  maxTokenCount?: number;
  maxInputLength?: number;
  minReplica?: number;
  maxReplica?: number;
  cooldown?: number;
  comment?: string;
}

export class EndpointCommands {
  private readonly client: GraphQLClient;

  constructor(
    readonly settings: Settings,
    private readonly out: Output,
  ) {
    this.client = graphqlClient(settings);
  }

  /** Runs one SDK call, turning transport and GraphQL errors into one-line CliErrors. */
  private async call<T>(run: (client: GraphQLClient) => Promise<T>): Promise<T> {
    try {
      return await run(this.client);
    } catch (error) {
      if (error instanceof ClientError) {
        const messages = error.response.errors?.map((e) => e.message).join('; ');
        if (error.response.status === 401) throw new CliError(`the API key was refused (401): ${messages ?? 'unauthenticated'}`);
        throw new CliError(messages || `HTTP ${error.response.status}`);
      }
      throw new CliError(`cannot reach ${this.settings.baseUrl}: ${(error as Error).message}`);
    }
  }

  /** `value` as JSON, or given to `human` with its text made printable (forHumans). */
  private emit<T>(value: T, human: (shown: T) => void): void {
    if (this.out.json) this.out.print(JSON.stringify(value, null, 2));
    else human(forHumans(value));
  }

  async whoami(): Promise<{ email: string; team: string }> {
    const { me } = await this.call((c) => c.request(MeDocument));
    if (!me) throw new CliError('the API key was refused');
    return { email: me.user.email, team: me.defaultTeam?.id ?? '' };
  }

  async list(projectId?: string): Promise<void> {
    const nodes: EndpointsQuery['endpoints']['edges'][number]['node'][] = [];
    let after: string | null = null;
    do {
      const page = await this.call((c) => c.request(EndpointsDocument, { projectId: projectId ?? null, first: 100, after }));
      nodes.push(...page.endpoints.edges.map((e) => e.node));
      after = page.endpoints.pageInfo.hasNextPage ? page.endpoints.pageInfo.endCursor : null;
    } while (after);
    this.emit(nodes, (shown) =>
      table(
        this.out.print,
        ['ID', 'NAME', 'STATUS', 'PROJECT'],
        shown.map((n) => [n.id, n.name, [statusColor(n.status.status), n.status.phase ?? ''].join(' ').trim(), n.project.name]),
      ),
    );
  }

  async get(id: string): Promise<EndpointFieldsFragment> {
    const { endpoint } = await this.call((c) => c.request(EndpointDocument, { id }));
    if (!endpoint) throw new CliError(`endpoint '${id}' not found`);
    this.emit(endpoint, (shown) => printEndpoint(this.out.print, shown));
    return endpoint;
  }

  async create(projectId: string, given: SpecFlags): Promise<void> {
    const flags = withInstance(given);
    const missing = (['name', 'model', 'instance'] as const).filter((flag) => !flags[flag]).map((flag) => `--${flag}`);
    if (missing.length > 0) {
      const options = flags.instance ? '' : ` (--instance is one of: ${INSTANCE_OPTIONS.map(describeInstanceOption).join(', ')})`;
      throw new CliError(`create needs ${listed(missing)}${options}`);
    }
    const result = await this.call((c) =>
      c.request(CreateEndpointDocument, {
        input: {
          projectId,
          name: flags.name!,
          hfModelRepo: flags.model!,
          instanceOptionId: flags.instance!,
          ...(flags.revision !== undefined ? { hfModelRepoRevision: flags.revision } : {}),
          ...(flags.comment !== undefined ? { initialVersionComment: flags.comment } : {}),
          advanced: advancedOf(flags) ?? {},
          ...(autoscalingOf(flags) ? { autoscalingPolicy: autoscalingOf(flags) } : {}),
        },
      }),
    );
    const { endpoint } = unwrap(result.createEndpoint, 'CreateEndpointSuccess');
    this.emit(endpoint, (shown) => printEndpoint(this.out.print, shown));
  }

  async update(id: string, given: SpecFlags): Promise<void> {
    const flags = withInstance(given);
    const advanced = advancedOf(flags);
    const autoscaling = autoscalingOf(flags);
    const input = {
      ...(flags.name !== undefined ? { name: flags.name } : {}),
      ...(flags.model !== undefined ? { hfModelRepo: flags.model } : {}),
      ...(flags.revision !== undefined ? { hfModelRepoRevision: flags.revision } : {}),
      ...(flags.instance !== undefined ? { instanceOptionId: flags.instance } : {}),
      ...(flags.comment !== undefined ? { newVersionComment: flags.comment } : {}),
      ...(advanced ? { advanced } : {}),
      ...(autoscaling ? { autoscalingPolicy: autoscaling } : {}),
    };
    if (Object.keys(input).length === 0) throw new CliError('update needs at least one setting to change (see --help)');
    const result = await this.call((c) => c.request(UpdateEndpointDocument, { id, input }));
    const { endpoint } = unwrap(result.updateEndpoint, 'UpdateEndpointSuccess');
    this.emit(endpoint, (shown) => printEndpoint(this.out.print, shown));
  }

  async act(action: 'sleep' | 'wake' | 'restart' | 'terminate', id: string): Promise<void> {
    let status;
    switch (action) {
      case 'sleep':
        status = unwrap((await this.call((c) => c.request(SleepEndpointDocument, { id }))).sleepEndpoint, 'SleepEndpointSuccess');
        break;
      case 'wake':
        status = unwrap((await this.call((c) => c.request(WakeEndpointDocument, { id }))).wakeEndpoint, 'WakeEndpointSuccess');
        break;
      case 'restart':
        status = unwrap((await this.call((c) => c.request(RestartEndpointDocument, { id }))).restartEndpoint, 'RestartEndpointSuccess');
        break;
      case 'terminate':
        status = unwrap(
          (await this.call((c) => c.request(TerminateEndpointDocument, { id }))).terminateEndpoint,
          'TerminateEndpointSuccess',
        );
        break;
    }
    this.emit(status.endpoint.status, (shown) => this.out.print(`${id}: ${describeStatus(shown)}`));
  }

  async remove(id: string): Promise<void> {
    const result = unwrap((await this.call((c) => c.request(DeleteEndpointDocument, { id }))).deleteEndpoint, 'DeleteEndpointSuccess');
    this.emit({ endpointId: result.endpointId, deleted: true }, (shown) => this.out.print(`deleted ${shown.endpointId}`));
  }

  async versions(id: string): Promise<void> {
    const versions: NonNullable<EndpointVersionsQuery['endpoint']>['versions']['edges'][number]['node'][] = [];
    let after: string | null = null;
    do {
      const page = await this.call((c) => c.request(EndpointVersionsDocument, { id, first: 100, after }));
      if (!page.endpoint) throw new CliError(`endpoint '${id}' not found`);
      versions.push(...page.endpoint.versions.edges.map((e) => e.node));
      after = page.endpoint.versions.pageInfo.hasNextPage ? page.endpoint.versions.pageInfo.endCursor : null;
    } while (after);
    this.emit(versions, (shown) =>
      table(
        this.out.print,
        ['VERSION', 'ROLLOUT', 'MODEL', 'BATCH', 'MAX_TOKENS', 'REPLICAS', 'CREATED', 'COMMENT'],
        shown.map((v) => [
          String(v.versionIndex),
          v.rolloutState + (v.rolledBackFrom !== null ? ` (rollback of ${v.rolledBackFrom})` : ''),
          `${v.spec.hfModelRepo ?? ''}${v.spec.hfModelRepoRevision ? `@${v.spec.hfModelRepoRevision}` : ''}`,
          String(v.spec.maxBatchSize),
          String(v.spec.maxTokenCount),
          `${v.spec.autoscalingMin}–${v.spec.autoscalingMax}`,
          v.createdAt,
          v.comment ?? '',
        ]),
      ),
    );
  }

  async rollback(id: string, versionIndex: number): Promise<void> {
    const result = await this.call((c) => c.request(RollbackEndpointDocument, { id, versionIndex }));
    const { endpoint } = unwrap(result.rollbackEndpoint, 'RollbackEndpointSuccess');
    this.emit(endpoint, (shown) => printEndpoint(this.out.print, shown));
  }
}

/** "--a", "--a and --b", "--a, --b and --c". */
function listed(items: readonly string[]): string {
  return items.length < 2 ? items.join('') : `${items.slice(0, -1).join(', ')} and ${items.at(-1)}`;
}

function advancedOf(flags: SpecFlags): AdvancedConfigInput | undefined {
  const advanced: AdvancedConfigInput = {
    ...(flags.maxBatchSize !== undefined ? { maxBatchSize: flags.maxBatchSize } : {}),
    ...(flags.maxTokenCount !== undefined ? { maxTokenCount: flags.maxTokenCount } : {}),
    ...(flags.maxInputLength !== undefined ? { maxInputLength: flags.maxInputLength } : {}),
  };
  return Object.keys(advanced).length > 0 ? advanced : undefined;
}

function autoscalingOf(flags: SpecFlags): AutoscalingPolicyInput | undefined {
  const policy: AutoscalingPolicyInput = {
    ...(flags.minReplica !== undefined ? { minReplica: flags.minReplica } : {}),
    ...(flags.maxReplica !== undefined ? { maxReplica: flags.maxReplica } : {}),
    ...(flags.cooldown !== undefined ? { cooldownPeriod: flags.cooldown } : {}),
  };
  return Object.keys(policy).length > 0 ? policy : undefined;
}

/** --gpu KIND [--gpus N] as the instance option they name (--gpus defaults to 1); never with --instance. */
export function withInstance(flags: SpecFlags): SpecFlags {
  if (flags.gpu === undefined && flags.gpus === undefined) return flags;
  if (flags.instance !== undefined) throw new CliError('give --instance or --gpu (with --gpus), not both');
  if (flags.gpu === undefined) throw new CliError(`--gpus needs --gpu (one of ${GPU_TYPES.join(', ')})`);
  const kind = flags.gpu.toUpperCase() as GpuType;
  if (!GPU_TYPES.includes(kind)) throw new CliError(`--gpu must be one of ${GPU_TYPES.join(', ')} (got ${JSON.stringify(flags.gpu)})`);
  const count = (flags.gpus ?? 1) as GpuCount;
  if (!GPU_COUNTS.includes(count)) throw new CliError(`--gpus must be one of ${GPU_COUNTS.join(', ')} (got ${flags.gpus})`);
  return { ...flags, instance: instanceOptionFor(kind, count).id };
}
