/**
 * Sleep, Wake, Restart, Terminate and Delete: each enabled only where the
 * lifecycle (the same rule as the server's) allows it from the live status.
 * Terminate and Delete ask first, inline; a refusal shows the server's message.
 */
import { useEffect, useRef, useState } from 'react';
import { useLocation } from 'wouter';
import { isAllowed, type EndpointStatus, type LifecycleAction } from '../../../domain/lifecycle.js';
import { failureOf } from '../../api/graphql.js';
import { useMutation } from '../../api/hooks.js';
import {
  EndpointPageDeleteDocument,
  EndpointPageRestartDocument,
  EndpointPageSleepDocument,
  EndpointPageTerminateDocument,
  EndpointPageWakeDocument,
} from '../../api/generated.js';
import { ErrorAlert, Notice } from '../../components/ui.js';

type Action = Extract<LifecycleAction, 'sleep' | 'wake' | 'restart' | 'terminate' | 'delete'>;

const ACTIONS: ReadonlyArray<{ action: Action; label: string; done: string; confirm?: string; danger?: boolean }> = [
  { action: 'sleep', label: 'Sleep', done: 'Sleep requested: the endpoint stops serving.' },
  { action: 'wake', label: 'Wake', done: 'Wake requested: the endpoint starts again.' },
  { action: 'restart', label: 'Restart', done: 'Restart requested.' },
  {
    action: 'terminate',
    label: 'Terminate',
    done: 'Terminate requested: the GPUs are being released.',
    confirm: 'stops all inference and releases the GPUs. The configuration is kept; Restart brings it back.',
    danger: true,
  },
  {
    action: 'delete',
    label: 'Delete',
    done: 'Deleted.',
    confirm: 'stops all replicas and deletes the endpoint. This cannot be undone.',
    danger: true,
  },
];

export function LifecycleActions({ id, name, status, onChanged }: { id: string; name: string; status: string; onChanged: () => void }) {
  const [, navigate] = useLocation();
  const sleep = useMutation(EndpointPageSleepDocument);
  const wake = useMutation(EndpointPageWakeDocument);
  const restart = useMutation(EndpointPageRestartDocument);
  const terminate = useMutation(EndpointPageTerminateDocument);
  const remove = useMutation(EndpointPageDeleteDocument);
  const [confirming, setConfirming] = useState<Action | undefined>();
  const [failure, setFailure] = useState<string | undefined>();
  const [done, setDone] = useState<string | undefined>();
  const confirmButton = useRef<HTMLButtonElement>(null);
  const actionButtons = useRef(new Map<Action, HTMLButtonElement>());
  const pending = sleep.pending || wake.pending || restart.pending || terminate.pending || remove.pending;
  const apiError = sleep.error ?? wake.error ?? restart.error ?? terminate.error ?? remove.error;

  useEffect(() => {
    if (confirming) confirmButton.current?.focus();
  }, [confirming]);

  const run = async (action: Action) => {
    setConfirming(undefined);
    setFailure(undefined);
    setDone(undefined);
    const variables = { id };
    let result: { __typename: string } | undefined;
    switch (action) {
      case 'sleep':
        result = (await sleep.run(variables))?.sleepEndpoint;
        break;
      case 'wake':
        result = (await wake.run(variables))?.wakeEndpoint;
        break;
      case 'restart':
        result = (await restart.run(variables))?.restartEndpoint;
        break;
      case 'terminate':
        result = (await terminate.run(variables))?.terminateEndpoint;
        break;
      case 'delete':
        result = (await remove.run(variables))?.deleteEndpoint;
        break;
    }
    if (!result) return; // an ApiError, shown below
    const failed = failureOf(result);
    if (failed) return setFailure(failed.message);
    if (action === 'delete') return navigate('/');
    setDone(ACTIONS.find((a) => a.action === action)?.done);
    onChanged();
  };

  /** Closes the confirmation; focus goes back to the button that opened it. */
  const cancel = () => {
    const opener = confirming && actionButtons.current.get(confirming);
    setConfirming(undefined);
    opener?.focus();
  };

  const allowed = (action: Action) => isAllowed(action, status as EndpointStatus);
  const confirmation = ACTIONS.find((a) => a.action === confirming);

  return (
    <section className="panel lifecycle" aria-labelledby="lifecycle-heading">
      <h2 id="lifecycle-heading">Lifecycle</h2>
      <div className="actions" role="group" aria-label="Lifecycle actions">
        {ACTIONS.map(({ action, label, danger, confirm }) => (
          <button
            key={action}
            ref={(button) => {
              if (button) actionButtons.current.set(action, button);
              else actionButtons.current.delete(action);
            }}
            type="button"
            className={danger ? 'danger' : 'secondary'}
            disabled={pending || !allowed(action)}
            aria-expanded={confirm ? confirming === action : undefined}
            onClick={() => (confirm ? setConfirming(action) : void run(action))}
          >
            {label}
          </button>
        ))}
      </div>
      {confirmation && (
        <div
          className="confirm"
          role="alertdialog"
          aria-labelledby="lifecycle-confirm-text"
          aria-modal="false"
          onKeyDown={(e) => {
            if (e.key === 'Escape') cancel();
          }}
        >
          <p id="lifecycle-confirm-text">
            {confirmation.label} <strong>{name}</strong>? This {confirmation.confirm}
          </p>
          <div className="actions">
            <button
              ref={confirmButton}
              type="button"
              className="danger"
              disabled={pending || !allowed(confirmation.action)}
              onClick={() => void run(confirmation.action)}
            >
              Yes, {confirmation.label.toLowerCase()}
            </button>
            <button type="button" className="secondary" onClick={cancel}>
              Cancel
            </button>
          </div>
        </div>
      )}
      <ErrorAlert error={failure ?? apiError} />
      {done && <Notice>{done}</Notice>}
    </section>
  );
}
