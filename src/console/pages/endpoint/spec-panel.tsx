/** The endpoint's current spec: model, instance, autoscaling and advanced settings. */
import type { ReactNode } from 'react';
import type { EndpointPageSpecFragment } from '../../api/generated.js';
import { describeInstance, describeModel } from './format.js';

function Fact({ term, children }: { term: string; children: ReactNode }) {
  return (
    <div>
      <dt>{term}</dt>
      <dd>{children}</dd>
    </div>
  );
}

const onOff = (value: boolean) => (value ? 'On' : 'Off');

export function SpecPanel({ spec }: { spec: EndpointPageSpecFragment }) {
  return (
    <section className="panel" aria-labelledby="spec-heading">
      <h2 id="spec-heading">Spec</h2>
      <h3>Model</h3>
      <dl className="facts">
        <Fact term={spec.wandbArtifact ? 'Registry artifact' : 'Hub repository'}>
          <code>{describeModel(spec)}</code>
        </Fact>
        {spec.wandbArtifact?.digest && (
          <Fact term="Digest">
            <code>{spec.wandbArtifact.digest}</code>
          </Fact>
        )}
        {!spec.wandbArtifact && !spec.hfModelRepoRevision && <Fact term="Revision">Default branch</Fact>}
      </dl>
      <h3>Instance</h3>
      <dl className="facts">
        <Fact term="Instance option">{describeInstance(spec)}</Fact>
      </dl>
      <h3>Autoscaling</h3>
      <dl className="facts">
        <Fact term="Replicas">
          {spec.autoscalingMin === spec.autoscalingMax
            ? `${spec.autoscalingMin} (fixed)`
            : `${spec.autoscalingMin} to ${spec.autoscalingMax}`}
        </Fact>
        <Fact term="Cooldown">{spec.autoscalingCooldown} s</Fact>
        <Fact term="Sleeps when idle">{spec.autoscalingMin === 0 ? 'Yes' : 'No'}</Fact>
      </dl>
      <h3>Advanced</h3>
      <dl className="facts">
        <Fact term="Max batch size">{spec.maxBatchSize}</Fact>
        <Fact term="Max input length">{spec.maxInputLength}</Fact>
        <Fact term="Max token count">
          {spec.maxTokenCount}
          {spec.maxTokenCountFromModel ? ' (follows the model)' : ''}
        </Fact>
        <Fact term="Content logging">{onOff(spec.enableContentLogging)}</Fact>
        <Fact term="Tokenizer adds special tokens">{onOff(spec.tokenizerAddSpecialTokens)}</Fact>
        <Fact term="Tokenizer skips special tokens">{onOff(spec.tokenizerSkipSpecialTokens)}</Fact>
      </dl>
    </section>
  );
}
