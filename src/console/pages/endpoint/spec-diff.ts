/** What changed between two versions' specs, field by field, as the version history shows it. */
import type { EndpointPageSpecFragment } from '../../api/generated.js';
import { describeInstance, describeModel } from './format.js';

export interface SpecChange {
  field: string;
  before: string;
  after: string;
}

const yesNo = (value: boolean) => (value ? 'on' : 'off');

/** The compared fields: a label and how each value reads. */
const FIELDS: ReadonlyArray<{ field: string; read(spec: EndpointPageSpecFragment): string }> = [
  { field: 'Name', read: (s) => s.name },
  { field: 'Model', read: (s) => describeModel(s) },
  { field: 'Instance', read: (s) => describeInstance(s) },
  { field: 'Min replicas', read: (s) => String(s.autoscalingMin) },
  { field: 'Max replicas', read: (s) => String(s.autoscalingMax) },
  { field: 'Cooldown (s)', read: (s) => String(s.autoscalingCooldown) },
  { field: 'Max batch size', read: (s) => String(s.maxBatchSize) },
  { field: 'Max input length', read: (s) => String(s.maxInputLength) },
  {
    field: 'Max token count',
    read: (s) => (s.maxTokenCountFromModel ? `${s.maxTokenCount} (follows the model)` : String(s.maxTokenCount)),
  },
  { field: 'Content logging', read: (s) => yesNo(s.enableContentLogging) },
  { field: 'Tokenizer adds special tokens', read: (s) => yesNo(s.tokenizerAddSpecialTokens) },
  { field: 'Tokenizer skips special tokens', read: (s) => yesNo(s.tokenizerSkipSpecialTokens) },
];

export function diffSpecs(previous: EndpointPageSpecFragment, next: EndpointPageSpecFragment): SpecChange[] {
  const changes: SpecChange[] = [];
  for (const { field, read } of FIELDS) {
    const before = read(previous);
    const after = read(next);
    if (before !== after) changes.push({ field, before, after });
  }
  return changes;
}
