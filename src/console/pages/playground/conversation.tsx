/**
 * The conversation: each message, the assistant's reasoning in its own
 * collapsible block above the answer, then the answer's finish reason, token
 * usage and timings. The newest text stays in view while it streams, unless
 * the user scrolled up to read.
 */
import { memo, useEffect, useRef } from 'react';
import { Link } from 'wouter';
import type { Message } from './chat-model.js';
import { TokenTable, TokenText } from './token-probabilities.js';

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
}

/** Finish reason, usage and timings of one answer. */
function AnswerFacts({ message }: { message: Message }) {
  const facts: string[] = [];
  if (message.finishReason) facts.push(`Finish reason: ${message.finishReason}`);
  if (message.stopped) facts.push('Stopped');
  if (message.usage) {
    facts.push(
      `Tokens: ${message.usage.promptTokens} prompt + ${message.usage.completionTokens} completion = ${message.usage.totalTokens}`,
    );
  }
  if (message.startedAt !== undefined && message.firstTokenAt !== undefined) {
    facts.push(`First token after ${seconds(message.firstTokenAt - message.startedAt)}`);
  }
  if (message.firstTokenAt !== undefined && message.endedAt !== undefined && message.usage && message.endedAt > message.firstTokenAt) {
    const perSecond = (message.usage.completionTokens / (message.endedAt - message.firstTokenAt)) * 1000;
    facts.push(`${perSecond.toFixed(1)} tokens/s`);
  }
  if (facts.length === 0) return null;
  return (
    <ul className="answer-facts" aria-label="About this answer">
      {facts.map((fact) => (
        <li key={fact} className={fact.startsWith('Finish reason') ? 'finish-reason' : undefined}>
          {fact}
        </li>
      ))}
    </ul>
  );
}

/** Memoized: while an answer streams, the messages before it (a long shaded answer among them) are not drawn again. */
const MessageView = memo(function MessageView({ message, onRetry }: { message: Message; onRetry?: (() => void) | undefined }) {
  if (message.role === 'user') {
    return (
      <li className="message message-user">
        <p className="message-who">You</p>
        <div className="message-text">{message.content}</div>
      </li>
    );
  }
  const waiting = message.streaming && !message.content && !message.reasoning;
  // The answer shaded token by token, when its tokens spell it (they always do, but for whitespace held back under JSON output).
  const tokens = message.tokens && message.tokens.map((t) => t.token).join('') === message.content ? message.tokens : undefined;
  return (
    <li className="message message-assistant" aria-busy={message.streaming ? true : undefined}>
      <p className="message-who">
        Assistant{message.endpointName ? <span className="hint"> · {message.endpointName}</span> : null}
        {message.streaming && <span className="hint"> · answering…</span>}
      </p>
      {message.reasoning && (
        <details className="reasoning" open>
          <summary>Reasoning</summary>
          <div className="reasoning-text">{message.reasoning}</div>
        </details>
      )}
      {waiting ? (
        <p className="hint">Waiting for the first token…</p>
      ) : (
        (message.content || !message.reasoning) && (
          <div className="message-text answer">
            {tokens && tokens.length > 0 ? (
              <TokenText tokens={tokens} />
            ) : (
              message.content || (message.streaming ? '' : message.error ? '' : <span className="hint">(no answer text)</span>)
            )}
          </div>
        )
      )}
      {message.error && (
        <div className="alert alert-error message-error" role="alert">
          {message.error}
          {message.errorEndpointId && (
            <>
              {' '}
              <Link href={`/endpoints/${message.errorEndpointId}`}>Open the endpoint&apos;s page</Link>
            </>
          )}
          {onRetry && (
            <div>
              <button type="button" className="secondary retry" onClick={onRetry}>
                Retry
              </button>
            </div>
          )}
        </div>
      )}
      {!message.streaming && message.tokens && message.tokens.length > 0 && <TokenTable tokens={message.tokens} />}
      {!message.streaming && <AnswerFacts message={message} />}
    </li>
  );
});

/** The messages; the last one, when it failed, offers `onRetry`. */
export function Conversation({ messages, onRetry }: { messages: Message[]; onRetry: (() => void) | undefined }) {
  const box = useRef<HTMLDivElement>(null);
  const stickToBottom = useRef(true);
  const lastId = useRef<number | undefined>(undefined);
  useEffect(() => {
    // A new answer (a message sent) brings the view back to the bottom.
    const last = messages[messages.length - 1]?.id;
    if (last !== undefined && last !== lastId.current) stickToBottom.current = true;
    lastId.current = last;
    if (box.current && stickToBottom.current) box.current.scrollTop = box.current.scrollHeight;
  }, [messages]);

  return (
    <div
      className="conversation"
      ref={box}
      tabIndex={0}
      role="region"
      aria-label="Conversation"
      onScroll={(e) => {
        const el = e.currentTarget;
        stickToBottom.current = el.scrollHeight - el.scrollTop - el.clientHeight < 40;
      }}
    >
      {messages.length === 0 ? (
        <p className="hint empty-conversation">No messages yet. Write one below.</p>
      ) : (
        <ol className="messages">
          {messages.map((m, index) => (
            <MessageView key={m.id} message={m} onRetry={index === messages.length - 1 && m.error ? onRetry : undefined} />
          ))}
        </ol>
      )}
    </div>
  );
}
