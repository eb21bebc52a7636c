/**
 * The create and update forms: one form component, checked in the browser
 * with the server's own rules (form-model.ts) before anything is sent; the
 * server's field errors land beside the same fields.
 */
import { useEffect, useRef, useState, type FormEvent, type ReactNode } from 'react';
import { Link, useLocation, useSearch } from 'wouter';
import { failureOf, type MutationFailure } from '../../api/graphql.js';
import { useMutation, useQuery } from '../../api/hooks.js';
import {
  EndpointsCreateDocument,
  EndpointsCreateFromArtifactDocument,
  EndpointsEditableDocument,
  EndpointsInstanceOptionsDocument,
  EndpointsUpdateDocument,
  type EndpointsInstanceOptionsQuery,
} from '../../api/generated.js';
import { ErrorAlert, Field, Loading, SelectField } from '../../components/ui.js';
import { useSession } from '../../session.js';
import {
  ADVANCED_FIELDS,
  FIELD_ORDER,
  artifactBody,
  artifactInput,
  blankValues,
  checkArtifact,
  checkCreate,
  checkUpdate,
  createBody,
  createInput,
  domainSpecOf,
  errorsOf,
  updateBody,
  updateInput,
  valuesOf,
  type FieldErrors,
  type FormValues,
} from './form-model.js';
import { AdvancedSection, bindForm, ModelSection, NUMBER_PROPS, Section } from './form-sections.js';
import './endpoints.css';

type InstanceOption = EndpointsInstanceOptionsQuery['instanceOptions'][number];

const optionLabel = (o: InstanceOption) => `${o.numGpu} × ${o.gpuType} (${o.gpuMemoryGb} GB each, ${o.numGpu * o.gpuMemoryGb} GB in all)`;

interface SubmitOutcome {
  /** The new or updated endpoint's id. */
  id?: string;
  failure?: MutationFailure;
}

interface EndpointFormProps {
  mode: 'create' | 'edit';
  initial: FormValues;
  projects: ReadonlyArray<{ id: string; name: string }>;
  options: readonly InstanceOption[];
  /** The server's rules on the values; violations keyed by the request's field paths. */
  check(values: FormValues, option: InstanceOption | undefined): Array<{ field: string; message: string }>;
  submit(values: FormValues, option: InstanceOption | undefined): Promise<SubmitOutcome | undefined>;
  pending: boolean;
  error: { message: string } | undefined;
  onDone(id: string): void;
  cancelHref: string;
  /** Edit: the model source is fixed. */
  lockedSource?: boolean;
}

export function EndpointForm(props: EndpointFormProps) {
  const { mode, initial, projects, options, pending } = props;
  const [values, setValues] = useState<FormValues>(initial);
  const [errors, setErrors] = useState<FieldErrors>({});
  const [alert, setAlert] = useState<string | undefined>();
  const [advancedOpen, setAdvancedOpen] = useState(false);
  const [focusRequest, setFocusRequest] = useState(0);
  const formRef = useRef<HTMLFormElement>(null);

  const set = <K extends keyof FormValues>(key: K, value: FormValues[K]) => setValues((v) => ({ ...v, [key]: value }));
  const option = options.find((o) => o.id === values.instanceId);

  // After errors are shown, the first invalid field gets the focus.
  useEffect(() => {
    if (focusRequest === 0) return;
    const first = FIELD_ORDER.find((key) => errors[key]);
    if (first) formRef.current?.querySelector<HTMLElement>(`[data-field="${first}"]`)?.focus();
  }, [focusRequest, errors]);

  const showErrors = (violations: ReadonlyArray<{ field: string; message: string }>, message?: string) => {
    const { fields, rest } = errorsOf(violations);
    setErrors(fields);
    if (ADVANCED_FIELDS.some((key) => fields[key])) setAdvancedOpen(true);
    setAlert(rest.length > 0 ? `${message ?? 'Some fields are invalid'}: ${rest.join('; ')}` : message);
    setFocusRequest((n) => n + 1);
  };

  const onSubmit = async (event: FormEvent) => {
    event.preventDefault();
    const violations = props.check(values, option);
    if (violations.length > 0) return showErrors(violations, 'Fix the fields marked below.');
    setErrors({});
    setAlert(undefined);
    const outcome = await props.submit(values, option);
    if (!outcome) return; // a thrown failure: props.error shows it
    if (outcome.failure) {
      const failure = outcome.failure;
      if (failure.fields && failure.fields.length > 0) showErrors(failure.fields, failure.message);
      else setAlert(failure.message);
      return;
    }
    if (outcome.id) props.onDone(outcome.id);
  };

  const form = bindForm(values, errors, set);
  const { text } = form;
  const source = values.source;

  return (
    <form ref={formRef} className="endpoint-form" onSubmit={onSubmit} noValidate aria-busy={pending}>
      <ErrorAlert error={alert ?? props.error} />
      <Section title="Endpoint">
        {mode === 'create' ? (
          <SelectField label="Project" {...text('projectId')}>
            {projects.map((p) => (
              <option key={p.id} value={p.id}>
                {p.name}
              </option>
            ))}
          </SelectField>
        ) : null}
        <Field
          label="Name"
          autoComplete="off"
          hint={source === 'wandb' && mode === 'create' ? 'Optional: generated from the artifact when empty.' : undefined}
          {...text('name')}
        />
      </Section>
      <ModelSection form={form} lockedSource={props.lockedSource} />
      <Section title="Instance">
        <SelectField label="Instance option" {...text('instanceId')}>
          {options.map((o) => (
            <option key={o.id} value={o.id}>
              {optionLabel(o)}
            </option>
          ))}
        </SelectField>
      </Section>
      <Section title="Autoscaling">
        <div className="field-row">
          <Field label="Min replicas" hint="0 lets it sleep when idle." {...NUMBER_PROPS} {...text('minReplica')} />
          <Field label="Max replicas" {...NUMBER_PROPS} {...text('maxReplica')} />
          <Field label="Cooldown (seconds)" hint="Idle time before scaling down." {...NUMBER_PROPS} {...text('cooldown')} />
        </div>
      </Section>
      {(source === 'hf' || mode === 'edit') && <AdvancedSection form={form} mode={mode} open={advancedOpen} onToggle={setAdvancedOpen} />}
      {!(mode === 'create' && source === 'wandb') && (
        <Field
          label={mode === 'create' ? 'Initial version comment' : 'Version comment'}
          hint="Optional: what this version is for."
          {...text('comment')}
        />
      )}
      <div className="actions">
        <button type="submit" disabled={pending}>
          {pending ? 'Saving…' : mode === 'create' ? 'Create endpoint' : 'Save new version'}
        </button>
        <Link href={props.cancelHref} className="button secondary">
          Cancel
        </Link>
      </div>
    </form>
  );
}

function defaultOption(options: readonly InstanceOption[]): string {
  return (options.find((o) => o.gpuType === 'H100' && o.numGpu === 1) ?? options[0])?.id ?? '';
}

export function CreateEndpointPage() {
  const { team } = useSession();
  const [, navigate] = useLocation();
  const search = useSearch();
  const options = useQuery(EndpointsInstanceOptionsDocument, {});
  const create = useMutation(EndpointsCreateDocument);
  const fromArtifact = useMutation(EndpointsCreateFromArtifactDocument);
  const projects = team?.projects ?? [];
  const wanted = new URLSearchParams(search).get('project');
  const projectId = projects.find((p) => p.id === wanted)?.id ?? projects[0]?.id ?? '';

  let body: ReactNode;
  if (options.error) body = <ErrorAlert error={options.error} />;
  else if (!options.data) body = <Loading what="the instance options" />;
  else if (projects.length === 0)
    body = (
      <p>
        This team has no project yet. <Link href="/">Create one on the endpoints page</Link> first.
      </p>
    );
  else
    body = (
      <EndpointForm
        key={team?.id}
        mode="create"
        initial={blankValues(projectId, defaultOption(options.data.instanceOptions))}
        projects={projects}
        options={options.data.instanceOptions}
        check={(values, option) => (values.source === 'hf' ? checkCreate(createBody(values)) : checkArtifact(artifactBody(values, option)))}
        submit={async (values, option) => {
          if (values.source === 'hf') {
            const result = await create.run({ input: createInput(createBody(values)) });
            if (!result) return undefined;
            const outcome = result.createEndpoint;
            return outcome.__typename === 'CreateEndpointSuccess' ? { id: outcome.endpoint.id } : { failure: failureOf(outcome) };
          }
          const result = await fromArtifact.run({ input: artifactInput(artifactBody(values, option)) });
          if (!result) return undefined;
          const outcome = result.createEndpointFromArtifact;
          return outcome.__typename === 'CreateEndpointFromArtifactSuccess' ? { id: outcome.endpoint.id } : { failure: failureOf(outcome) };
        }}
        pending={create.pending || fromArtifact.pending}
        error={create.error ?? fromArtifact.error}
        onDone={(id) => navigate(`/endpoints/${id}`)}
        cancelHref="/"
      />
    );
  return (
    <>
      <h1>New endpoint</h1>
      {body}
    </>
  );
}

export function EditEndpointPage({ id }: { id: string }) {
  const [, navigate] = useLocation();
  const endpoint = useQuery(EndpointsEditableDocument, { id });
  const options = useQuery(EndpointsInstanceOptionsDocument, {});
  const update = useMutation(EndpointsUpdateDocument);
  const found = endpoint.data?.endpoint;

  let body: ReactNode;
  if (endpoint.error || options.error) body = <ErrorAlert error={endpoint.error ?? options.error} />;
  else if (!endpoint.data || !options.data) body = <Loading what="the endpoint" />;
  else if (!found)
    body = (
      <p role="alert">
        No endpoint {id} here. <Link href="/">Back to the endpoints</Link>.
      </p>
    );
  else {
    const initial = valuesOf(found);
    const current = domainSpecOf(found.currentVersion.spec);
    body = (
      <EndpointForm
        key={`${found.id}:${found.currentVersion.versionIndex}`}
        mode="edit"
        initial={initial}
        projects={[found.project]}
        options={options.data.instanceOptions}
        lockedSource={initial.source === 'wandb'}
        check={(values) => checkUpdate(updateBody(values, initial), current)}
        submit={async (values) => {
          const result = await update.run({ id, input: updateInput(updateBody(values, initial)) });
          if (!result) return undefined;
          const outcome = result.updateEndpoint;
          return outcome.__typename === 'UpdateEndpointSuccess' ? { id: outcome.endpoint.id } : { failure: failureOf(outcome) };
        }}
        pending={update.pending}
        error={update.error}
        onDone={(doneId) => navigate(`/endpoints/${doneId}`)}
        cancelHref={`/endpoints/${id}`}
      />
    );
  }
  return (
    <>
      <h1>Edit {found ? found.name : 'endpoint'}</h1>
      {found && (
        <p className="muted">
          A new version of <code>{found.id}</code> (now version {found.currentVersion.versionIndex}); only the fields you change are sent.
        </p>
      )}
      {body}
    </>
  );
}
