/**
 * The endpoint form's parts: its fieldsets, the binding of a field to the
 * form's values and errors, the model source (a hub repository or a registry
 * artifact) and the advanced settings.
 */
import { useId, type ReactNode } from 'react';
import { Field } from '../../components/ui.js';
import type { FieldErrors, FieldKey, FormValues } from './form-model.js';

type FlagKey = 'skipSpecialTokens' | 'addSpecialTokens' | 'contentLogging';

/** The form's values and errors, and the props that tie a field to them (its error, its `data-field` for the focus). */
export function bindForm(values: FormValues, errors: FieldErrors, set: <K extends keyof FormValues>(key: K, value: FormValues[K]) => void) {
  return {
    values,
    errors,
    set,
    text: (key: Exclude<FieldKey, FlagKey>) => ({
      error: errors[key],
      'data-field': key,
      value: values[key],
      onChange: (e: { target: { value: string } }) => set(key, e.target.value),
    }),
  };
}

export type FormBinding = ReturnType<typeof bindForm>;

export const NUMBER_PROPS = { type: 'number', inputMode: 'numeric' as const, step: 1 };

export function Section({ title, children }: { title: string; children: ReactNode }) {
  return (
    <fieldset className="panel form-section">
      <legend>{title}</legend>
      {children}
    </fieldset>
  );
}

/** Where the model comes from; on edit the source is fixed (`lockedSource`). */
export function ModelSection({ form, lockedSource }: { form: FormBinding; lockedSource: boolean | undefined }) {
  const { values, set, text } = form;
  const source = values.source;
  return (
    <Section title="Model">
      {!lockedSource && (
        <fieldset className="source-choice">
          <legend>Source</legend>
          <label>
            <input type="radio" name="source" value="hf" checked={source === 'hf'} onChange={() => set('source', 'hf')} /> Hub model
          </label>
          <label>
            <input type="radio" name="source" value="wandb" checked={source === 'wandb'} onChange={() => set('source', 'wandb')} /> Registry
            artifact
          </label>
        </fieldset>
      )}
      {source === 'hf' ? (
        <>
          <Field label="Hub model repository" placeholder="org/model" autoComplete="off" spellCheck={false} {...text('repo')} />
          <Field
            label="Revision"
            hint="A branch, tag or commit; empty for the default branch."
            autoComplete="off"
            spellCheck={false}
            {...text('revision')}
          />
        </>
      ) : lockedSource ? (
        <p>
          Serves the registry artifact <code>{values.artifact}</code>; roll out another version from the registry.
        </p>
      ) : (
        <Field
          label="Registry artifact"
          placeholder="org/registry/name:version"
          hint="The version (v3) or an alias such as latest."
          autoComplete="off"
          spellCheck={false}
          {...text('artifact')}
        />
      )}
    </Section>
  );
}

function Checkbox({ label, field, form }: { label: string; field: FlagKey; form: FormBinding }) {
  const id = useId();
  const error = form.errors[field];
  return (
    <div className="field checkbox-field">
      <label htmlFor={id}>
        <input
          id={id}
          type="checkbox"
          checked={form.values[field]}
          data-field={field}
          aria-invalid={error ? true : undefined}
          aria-describedby={error ? `${id}-error` : undefined}
          onChange={(e) => form.set(field, e.target.checked)}
        />{' '}
        {label}
      </label>
      {error && (
        <p className="field-error" id={`${id}-error`} role="alert">
          {error}
        </p>
      )}
    </div>
  );
}

const FLAGS: Array<[FlagKey, string]> = [
  ['skipSpecialTokens', 'Skip special tokens in the output'],
  ['addSpecialTokens', 'Add special tokens to the prompt'],
  ['contentLogging', 'Log request content'],
];

/** The engine's limits and flags, folded away; on create, the hints say what an empty field means. */
export function AdvancedSection({
  form,
  mode,
  open,
  onToggle,
}: {
  form: FormBinding;
  mode: 'create' | 'edit';
  open: boolean;
  onToggle(open: boolean): void;
}) {
  const { text } = form;
  const createHint = (hint: string) => (mode === 'create' ? hint : undefined);
  return (
    <details className="panel advanced" open={open} onToggle={(e) => onToggle(e.currentTarget.open)}>
      <summary>Advanced</summary>
      <div className="field-row">
        <Field label="Max batch size" hint={createHint('Empty: 8.')} {...NUMBER_PROPS} {...text('maxBatchSize')} />
        <Field
          label="Max token count"
          hint={createHint("Empty: follow the model's context (bounded by the instance's memory).")}
          {...NUMBER_PROPS}
          {...text('maxTokenCount')}
        />
        <Field
          label="Max input length"
          hint={createHint('Empty: 2048, or the max token count when smaller.')}
          {...NUMBER_PROPS}
          {...text('maxInputLength')}
        />
      </div>
      {FLAGS.map(([field, label]) => (
        <Checkbox key={field} label={label} field={field} form={form} />
      ))}
    </details>
  );
}
