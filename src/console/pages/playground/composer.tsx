/** The message box and its actions: Send (or Enter), Stop while an answer streams, Clear. */
import { useEffect, useId, useRef, useState, type FormEvent, type KeyboardEvent, type RefObject } from 'react';
import { ErrorAlert } from '../../components/ui.js';

export function Composer({
  textarea,
  error,
  streaming,
  canSend,
  canClear,
  onSend,
  onStop,
  onClear,
}: {
  textarea: RefObject<HTMLTextAreaElement | null>;
  error: string | undefined;
  streaming: boolean;
  canSend: boolean;
  canClear: boolean;
  /** Sends the text; false when it was not sent (the draft stays). */
  onSend(text: string): boolean;
  onStop(): void;
  onClear(): void;
}) {
  const id = useId();
  const [draft, setDraft] = useState('');

  const sendDraft = () => {
    if (onSend(draft.trim())) setDraft('');
  };

  const onSubmit = (event: FormEvent) => {
    event.preventDefault();
    sendDraft();
  };

  const onKeyDown = (event: KeyboardEvent<HTMLTextAreaElement>) => {
    if (event.key === 'Enter' && !event.shiftKey && !event.nativeEvent.isComposing) {
      event.preventDefault();
      sendDraft();
    }
  };

  // When Stop disappears under the keyboard focus, focus goes back to the message box.
  const stopHadFocus = useRef(false);
  useEffect(() => {
    if (!streaming && stopHadFocus.current) {
      stopHadFocus.current = false;
      textarea.current?.focus();
    }
  }, [streaming, textarea]);

  return (
    <form className="composer" onSubmit={onSubmit} aria-label="Write a message">
      <ErrorAlert error={error} />
      <div className="field">
        <label htmlFor={`${id}-message`}>Message</label>
        <textarea
          id={`${id}-message`}
          ref={textarea}
          rows={3}
          value={draft}
          onChange={(e) => setDraft(e.target.value)}
          onKeyDown={onKeyDown}
          aria-describedby={`${id}-message-hint`}
        />
        <p className="hint" id={`${id}-message-hint`}>
          Enter sends; Shift+Enter starts a new line.
        </p>
      </div>
      <div className="actions">
        <button type="submit" disabled={streaming || !canSend}>
          Send
        </button>
        {streaming && (
          <button
            type="button"
            className="danger"
            onClick={onStop}
            onFocus={() => (stopHadFocus.current = true)}
            onBlur={() => (stopHadFocus.current = false)}
          >
            Stop
          </button>
        )}
        <button type="button" className="secondary" onClick={onClear} disabled={!canClear}>
          Clear
        </button>
      </div>
    </form>
  );
}
