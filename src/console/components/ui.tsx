/**
 * The console's shared building blocks. Every input has a label; a field's
 * error is tied to it (aria-describedby, aria-invalid) and announced; page
 * errors and confirmations are announced through live regions.
 */
import { useId, type InputHTMLAttributes, type ReactNode, type SelectHTMLAttributes } from 'react';

interface FieldProps {
  label: string;
  error?: string | undefined;
  /** Text, or markup such as a command in <code>. */
  hint?: ReactNode;
}

/** The label, hint and error around one control; `control` gets the control's id and its aria attributes. */
function FieldFrame({
  label,
  error,
  hint,
  control,
}: FieldProps & { control(aria: { id: string; 'aria-invalid': true | undefined; 'aria-describedby': string | undefined }): ReactNode }) {
  const id = useId();
  const described = [hint ? `${id}-hint` : '', error ? `${id}-error` : ''].filter(Boolean).join(' ') || undefined;
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      {control({ id, 'aria-invalid': error ? true : undefined, 'aria-describedby': described })}
      {hint && (
        <p className="hint" id={`${id}-hint`}>
          {hint}
        </p>
      )}
      {error && (
        <p className="field-error" id={`${id}-error`} role="alert">
          {error}
        </p>
      )}
    </div>
  );
}

export function Field({ label, error, hint, ...input }: FieldProps & InputHTMLAttributes<HTMLInputElement>) {
  return <FieldFrame label={label} error={error} hint={hint} control={(aria) => <input {...aria} {...input} />} />;
}

export function SelectField({
  label,
  error,
  hint,
  children,
  ...select
}: FieldProps & { children: ReactNode } & SelectHTMLAttributes<HTMLSelectElement>) {
  return (
    <FieldFrame
      label={label}
      error={error}
      hint={hint}
      control={(aria) => (
        <select {...aria} {...select}>
          {children}
        </select>
      )}
    />
  );
}

/** A page-level failure, announced at once. */
export function ErrorAlert({ error }: { error: { message: string } | string | undefined }) {
  if (!error) return null;
  return (
    <div className="alert alert-error" role="alert">
      {typeof error === 'string' ? error : error.message}
    </div>
  );
}

/** A confirmation or progress line, announced politely. */
export function Notice({ children }: { children: ReactNode }) {
  return (
    <div className="alert alert-info" role="status">
      {children}
    </div>
  );
}

const STATUS_TONE: Record<string, string> = {
  RUNNING: 'ok',
  READY: 'ok',
  UPDATING: 'busy',
  INITIALIZING: 'busy',
  STOPPING: 'busy',
  AWAKING: 'busy',
  SLEEPING: 'idle',
  TERMINATING: 'busy',
  TERMINATED: 'idle',
  FAILED: 'bad',
  // A replica's states (READY and FAILED above).
  STARTING: 'busy',
  DRAINING: 'busy',
  STOPPED: 'idle',
};

/** An endpoint's status (or a replica's state) as a badge; the text is the status itself, so it reads the same to a screen reader. */
export function StatusBadge({ status }: { status: string }) {
  return (
    <span className={`badge badge-${STATUS_TONE[status] ?? 'idle'}`} data-status={status}>
      {status}
    </span>
  );
}

export function Loading({ what }: { what: string }) {
  return (
    <p className="loading" role="status">
      Loading {what}…
    </p>
  );
}
