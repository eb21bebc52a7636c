/**
 * Endpoints from W&B registry artifacts: the mutation that creates one (or
 * rolls out the endpoint an idempotency key created), beside the REST route
 * POST /dedicated/endpoint/wandb-artifact-create.
 */
import type { EndpointRecord } from '../../../domain/endpoint.js';
import type { ProjectRecord } from '../../../domain/identity.js';
import { builder } from '../builder.js';
import { AutoscalingPolicyInput, Endpoint, SimplescaleInput, toRestBody } from './endpoints.js';
import { GpuType } from './enums.js';
import { InvalidArgumentError, InvalidTransitionError, NotFoundError, payload, resultUnion } from './errors.js';
import { Project } from './identity.js';

const AcceleratorInput = builder.inputType('AcceleratorInput', {
  fields: (t) => ({
    type: t.field({ type: GpuType, description: '@default H100' }),
    count: t.int({ description: '1, 2, 4 or 8. @default 1' }),
  }),
});

const ArtifactEndpointInput = builder.inputType('ArtifactEndpointInput', {
  description: 'An endpoint from a W&B registry artifact version; the same fields as POST /dedicated/endpoint/wandb-artifact-create.',
  fields: (t) => ({
    wandbArtifactVersionName: t.string({
      required: true,
      description: '`<org>/<registry>/<name>:<version>`, the version `v3` or an alias such as `latest`.',
    }),
    name: t.string({ description: 'Generated from the artifact when omitted.' }),
    projectId: t.id({ description: 'Required with idempotencyKey; without both, a new project is created in the acting team.' }),
    idempotencyKey: t.string({
      description: 'A call with a key that already created an endpoint in the project rolls that endpoint out instead.',
    }),
    autoscalingPolicy: t.field({ type: AutoscalingPolicyInput }),
    simplescale: t.field({ type: SimplescaleInput }),
    accelerator: t.field({ type: AcceleratorInput }),
  }),
});

const CreateEndpointFromArtifactSuccess = builder
  .objectRef<{ endpoint: EndpointRecord; project: ProjectRecord; created: boolean }>('CreateEndpointFromArtifactSuccess')
  .implement({
    fields: (t) => ({
      endpoint: t.field({ type: Endpoint, resolve: (p) => p.endpoint }),
      project: t.field({ type: Project, resolve: (p) => p.project }),
      created: t.boolean({ description: 'False when an existing endpoint was rolled out.', resolve: (p) => p.created }),
    }),
  });

builder.mutationField('createEndpointFromArtifact', (t) =>
  t.field({
    type: resultUnion('CreateEndpointFromArtifactResult', CreateEndpointFromArtifactSuccess, [
      NotFoundError,
      InvalidArgumentError,
      InvalidTransitionError,
    ]),
    description: 'Creates an endpoint from a registry artifact version, or rolls out the endpoint an idempotency key created.',
    args: { input: t.arg({ type: ArtifactEndpointInput, required: true }) },
    resolve: async (_, { input }, { principal, services }) =>
      payload(await services.endpoints.createFromArtifact(principal, toRestBody(input)), (value) => value),
  }),
);
