import { ROLLOUT_STATES } from '../../../domain/endpoint.js';
import { TEAM_ROLES } from '../../../domain/identity.js';
import { GPU_TYPES } from '../../../domain/instance-catalog.js';
import { ENDPOINT_ERROR_CODES, ENDPOINT_PHASES, ENDPOINT_STATUSES } from '../../../domain/lifecycle.js';
import { builder } from '../builder.js';

export const EndpointStatusValue = builder.enumType('EndpointStatusValue', {
  description: 'Where an endpoint is in its lifecycle.',
  values: ENDPOINT_STATUSES,
});

export const EndpointPhase = builder.enumType('EndpointPhase', {
  description: 'The step of a start (create, restart or wake) in progress.',
  values: ENDPOINT_PHASES,
});

export const EndpointErrorCode = builder.enumType('EndpointErrorCode', {
  description: 'Why an endpoint failed, or why its last rollout failed.',
  values: ENDPOINT_ERROR_CODES,
});

export const GpuType = builder.enumType('GpuType', { values: GPU_TYPES });

export const TeamRole = builder.enumType('TeamRole', { values: TEAM_ROLES });

export const RolloutState = builder.enumType('RolloutState', {
  description: 'RECORDED: not applied yet; ROLLED_OUT: replicas ran it; FAILED: its rollout failed.',
  values: ROLLOUT_STATES,
});
