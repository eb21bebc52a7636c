/**
 * The chat playground: pick one of the team's endpoints, write, and read the
 * answer as it streams through the `chatCompletion` subscription (ending the
 * subscription is Stop: the gateway cancels the generation). The reasoning
 * (the think block) shows in its own collapsible block above the answer; the
 * finish reason, token usage and timings follow it. A polite live region
 * says when an answer is complete, never each token.
 */
import { useCallback, useEffect, useId, useMemo, useRef, useState, type FormEvent, type KeyboardEvent } from 'react';
import { Link, useLocation } from 'wouter';
import type { ApiError } from '../../api/graphql.js';
import { useQuery, useSubscription } from '../../api/hooks.js';
import {
  PlaygroundChatDocument,
  PlaygroundEndpointDocument,
  PlaygroundEndpointsDocument,
  PlaygroundStatusDocument,
  type ChatCompletionInput,
} from '../../api/generated.js';
import { ErrorAlert, Loading, StatusBadge } from '../../components/ui.js';
import { useSession } from '../../session.js';
import './playground.css';

interface Usage {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
}

interface Message {
  id: number;
  role: 'user' | 'assistant';
  content: string;
  reasoning: string;
  /** Assistant only: the endpoint that answered. */
  endpointName?: string;
  streaming?: boolean;
  finishReason?: string | null;
  stopped?: boolean;
  error?: string;
  /** The endpoint's page, when the failure is the endpoint's state. */
  errorEndpointId?: string;
  usage?: Usage;
  startedAt?: number;
  firstTokenAt?: number;
  endedAt?: number;
}

interface EndpointChoice {
  id: string;
  name: string;
  projectName: string;
  status: string;
}

interface Settings {
  temperature: string;
  topP: string;
  maxTokens: string;
  reasoning: boolean;
  system: string;
}

const DEFAULT_SETTINGS: Settings = { temperature: '0.7', topP: '1', maxTokens: '512', reasoning: true, system: '' };

/** What the endpoint's status means for a message sent now. */
function statusHint(status: string): string | undefined {
  switch (status) {
    case 'RUNNING':
    case 'READY':
      return undefined;
    case 'SLEEPING':
      return 'The endpoint is asleep: sending a message wakes it, and the answer waits until it has started.';
    case 'AWAKING':
    case 'INITIALIZING':
    case 'UPDATING':
      return 'The endpoint is starting: the answer waits until it serves.';
    case 'FAILED':
    case 'TERMINATED':
    case 'TERMINATING':
    case 'STOPPING':
      return 'The endpoint does not serve requests now; restart or wake it from its page.';
    default:
      return undefined;
  }
}

/** A subscription failure in words: the server's message, with what to do for the usual cases. */
function describeError(error: ApiError): string {
  const sentence = (text: string) => (/[.!?]$/.test(text) ? text : `${text}.`);
  switch (error.code) {
    case 'upstream_disconnected':
      return `The answer was cut short: ${sentence(error.message)}`;
    default:
      return sentence(error.message);
  }
}

function parseNumber(value: string, min: number, max: number, integer = false): number | undefined {
  if (value.trim() === '') return undefined;
  const n = Number(value);
  if (!Number.isFinite(n) || n < min || n > max || (integer && !Number.isInteger(n))) return Number.NaN;
  return n;
}

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

function MessageView({ message, onRetry }: { message: Message; onRetry?: (() => void) | undefined }) {
  if (message.role === 'user') {
    return (
      <li className="message message-user">
        <p className="message-who">You</p>
        <div className="message-text">{message.content}</div>
      </li>
    );
  }
  const waiting = message.streaming && !message.content && !message.reasoning;
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
            {message.content || (message.streaming ? '' : message.error ? '' : <span className="hint">(no answer text)</span>)}
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
      {!message.streaming && <AnswerFacts message={message} />}
    </li>
  );
}

/** The picked endpoint's live status, and what it means for sending. */
function EndpointStatusLine({ endpoint, onStatus }: { endpoint: EndpointChoice; onStatus(status: string): void }) {
  const status = endpoint.status;
  useSubscription(PlaygroundStatusDocument, { endpointId: endpoint.id }, (value) => onStatus(value.endpointStatus.status.status));
  const hint = statusHint(status);
  return (
    <div className="endpoint-status">
      <p>
        Status: <StatusBadge status={status} /> <Link href={`/endpoints/${endpoint.id}`}>Endpoint page</Link>
      </p>
      {hint && <p className="hint">{hint}</p>}
    </div>
  );
}

export function PlaygroundPage({ id }: { id?: string | undefined }) {
  const { api, team } = useSession();
  const [, navigate] = useLocation();
  const formId = useId();
  const list = useQuery(PlaygroundEndpointsDocument, { teamId: team?.id ?? '' }, { skip: !team });
  const inTeam = useMemo<EndpointChoice[]>(
    () =>
      list.data?.team?.projects.flatMap((project) =>
        project.endpoints.nodes.map((e) => ({ id: e.id, name: e.name, projectName: project.name, status: e.status.status })),
      ) ?? [],
    [list.data],
  );
  const listed = inTeam.some((e) => e.id === id);
  // An endpoint named by the URL that is not among the team's (another team's, shared with the caller): read it alone.
  const single = useQuery(PlaygroundEndpointDocument, { id: id ?? '' }, { skip: !id || list.loading || listed });
  // The picked endpoint's status as its subscription reports it, over what the list read.
  const [liveStatus, setLiveStatus] = useState<Record<string, string>>({});
  const endpoints = useMemo<EndpointChoice[]>(() => {
    const extra = single.data?.endpoint;
    const all =
      !extra || inTeam.some((e) => e.id === extra.id)
        ? inTeam
        : [{ id: extra.id, name: extra.name, projectName: extra.project.name, status: extra.status.status }, ...inTeam];
    return all.map((e) => (liveStatus[e.id] ? { ...e, status: liveStatus[e.id]! } : e));
  }, [inTeam, single.data, liveStatus]);
  const selected = endpoints.find((e) => e.id === id);
  const unknownId = id !== undefined && !list.loading && !single.loading && !selected && !list.error;

  const [messages, setMessages] = useState<Message[]>([]);
  const [draft, setDraft] = useState('');
  const [settings, setSettings] = useState<Settings>(DEFAULT_SETTINGS);
  const [announcement, setAnnouncement] = useState('');
  const [formError, setFormError] = useState<string | undefined>();
  const stopRef = useRef<(() => void) | undefined>(undefined);
  const nextId = useRef(1);
  const textarea = useRef<HTMLTextAreaElement>(null);
  const conversation = useRef<HTMLDivElement>(null);
  const streaming = messages.some((m) => m.streaming);

  // Leaving the page ends the answer being streamed (and the generation with it).
  useEffect(() => () => stopRef.current?.(), []);

  // Keep the newest text in view while it streams, unless the user scrolled up to read.
  const stickToBottom = useRef(true);
  useEffect(() => {
    const box = conversation.current;
    if (box && stickToBottom.current) box.scrollTop = box.scrollHeight;
  }, [messages]);

  const update = useCallback((messageId: number, change: (m: Message) => Partial<Message>) => {
    setMessages((all) => all.map((m) => (m.id === messageId ? { ...m, ...change(m) } : m)));
  }, []);

  const numbers = {
    temperature: parseNumber(settings.temperature, 0, 2),
    topP: parseNumber(settings.topP, 0, 1),
    maxTokens: parseNumber(settings.maxTokens, 1, 1_000_000, true),
  };
  const settingErrors = {
    temperature: Number.isNaN(numbers.temperature) ? 'A number from 0 to 2.' : undefined,
    topP: Number.isNaN(numbers.topP) ? 'A number from 0 to 1.' : undefined,
    maxTokens: Number.isNaN(numbers.maxTokens) ? 'A whole number, at least 1.' : undefined,
  };

  /** Sends `text` after the conversation `before` (the messages shown, or fewer for a retry). */
  const send = (text: string, before: Message[]): boolean => {
    if (streaming) return false;
    if (!selected) {
      setFormError('Pick an endpoint first.');
      return false;
    }
    if (!text) {
      setFormError('Write a message first.');
      textarea.current?.focus();
      return false;
    }
    if (settingErrors.temperature || settingErrors.topP || settingErrors.maxTokens) {
      setFormError('Some settings are not valid: see the settings.');
      return false;
    }
    setFormError(undefined);
    setAnnouncement('');

    const history = before.filter((m) => !m.error || m.content).map((m) => ({ role: m.role, content: m.content }));
    const userMessage: Message = { id: nextId.current++, role: 'user', content: text, reasoning: '' };
    const answerId = nextId.current++;
    const startedAt = performance.now();
    const answer: Message = {
      id: answerId,
      role: 'assistant',
      content: '',
      reasoning: '',
      endpointName: selected.name,
      streaming: true,
      startedAt,
    };
    setMessages([...before, userMessage, answer]);
    stickToBottom.current = true;

    const input: ChatCompletionInput = {
      model: selected.id,
      messages: [
        ...(settings.system.trim() ? [{ role: 'system', content: settings.system.trim() }] : []),
        ...history,
        { role: 'user', content: text },
      ],
      chatTemplateKwargs: { enable_thinking: settings.reasoning },
      includeUsage: true,
      ...(numbers.temperature !== undefined ? { temperature: numbers.temperature } : {}),
      ...(numbers.topP !== undefined ? { topP: numbers.topP } : {}),
      ...(numbers.maxTokens !== undefined ? { maxTokens: numbers.maxTokens } : {}),
    };

    let chunkId: string | undefined;
    let finishReason: string | undefined;
    let finished = false;
    const finish = (change: Partial<Message>, say: string) => {
      if (finished) return;
      finished = true;
      stopRef.current = undefined;
      const endedAt = performance.now();
      update(answerId, () => ({ ...change, streaming: false, endedAt }));
      setAnnouncement(say);
    };
    const stop = api.subscribe(
      PlaygroundChatDocument,
      { input },
      {
        next: ({ chatCompletion: chunk }) => {
          if (chunkId !== undefined && chunk.id !== chunkId) {
            // The socket reconnected and the request started over: end here rather than mix two answers.
            stop();
            finish({ error: 'The connection to the gateway broke during the answer; it was cut short.' }, 'The answer was cut short.');
            return;
          }
          chunkId = chunk.id;
          const choice = chunk.choices[0];
          const content = choice?.delta.content ?? '';
          const reasoning = choice?.delta.reasoningContent ?? '';
          if (choice?.finishReason) finishReason = choice.finishReason;
          update(answerId, (m) => ({
            content: m.content + content,
            reasoning: m.reasoning + reasoning,
            ...(m.firstTokenAt === undefined && (content || reasoning) ? { firstTokenAt: performance.now() } : {}),
            ...(choice?.finishReason ? { finishReason: choice.finishReason } : {}),
            ...(chunk.usage ? { usage: chunk.usage } : {}),
          }));
        },
        error: (error) =>
          finish(
            {
              error: describeError(error),
              ...(error.code === 'endpoint_not_running' || error.code === 'endpoint_not_ready' ? { errorEndpointId: input.model } : {}),
            },
            'The answer failed.',
          ),
        complete: () => finish({}, `Answer complete${finishReason ? `, finish reason: ${finishReason}` : ''}.`),
      },
    );
    stopRef.current = () => {
      stop();
      finish({ stopped: true }, 'Stopped.');
    };
    return true;
  };

  const stop = () => {
    stopRef.current?.();
    textarea.current?.focus();
  };

  const clear = () => {
    stopRef.current?.();
    setMessages([]);
    setAnnouncement('Conversation cleared.');
    textarea.current?.focus();
  };

  const sendDraft = () => {
    if (send(draft.trim(), messages)) setDraft('');
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

  /** Sends the failed answer's question again, in place of the failed pair. */
  const retry = () => {
    const question = messages[messages.length - 2];
    if (question?.role !== 'user') return;
    send(question.content, messages.slice(0, -2));
    textarea.current?.focus();
  };

  // When Stop disappears under the keyboard focus, focus goes back to the message box.
  const stopButton = useRef<HTMLButtonElement>(null);
  const stopHadFocus = useRef(false);
  useEffect(() => {
    if (!streaming && stopHadFocus.current) {
      stopHadFocus.current = false;
      textarea.current?.focus();
    }
  }, [streaming]);

  const set = (field: keyof Settings) => (value: string | boolean) => setSettings((s) => ({ ...s, [field]: value }));

  return (
    <div className="playground">
      <h1>Playground</h1>
      {!team && <p>You are in no team yet, so there are no endpoints to talk to.</p>}
      <ErrorAlert error={list.error} />

      <div className="playground-grid">
        <div className="playground-chat">
          <div className="panel endpoint-picker">
            {list.loading && !list.data ? (
              <Loading what="the endpoints" />
            ) : (
              <div className="field">
                <label htmlFor={`${formId}-endpoint`}>Endpoint</label>
                <select
                  id={`${formId}-endpoint`}
                  value={selected?.id ?? ''}
                  onChange={(e) => navigate(e.target.value ? `/playground/${e.target.value}` : '/playground')}
                >
                  <option value="">{endpoints.length ? 'Pick an endpoint…' : 'No endpoints in this team'}</option>
                  {endpoints.map((e) => (
                    <option key={e.id} value={e.id}>
                      {e.name} ({e.projectName}) — {e.status}
                    </option>
                  ))}
                </select>
              </div>
            )}
            {unknownId && <ErrorAlert error={single.error ?? `No endpoint ${id} in your teams.`} />}
            {selected && (
              <EndpointStatusLine
                key={selected.id}
                endpoint={selected}
                onStatus={(status) => setLiveStatus((all) => (all[selected.id] === status ? all : { ...all, [selected.id]: status }))}
              />
            )}
            {!list.loading && endpoints.length === 0 && team && (
              <p>
                <Link href="/endpoints/new">Create an endpoint</Link> to talk to it here.
              </p>
            )}
          </div>

          <div
            className="conversation"
            ref={conversation}
            tabIndex={0}
            role="region"
            aria-label="Conversation"
            onScroll={(e) => {
              const box = e.currentTarget;
              stickToBottom.current = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
            }}
          >
            {messages.length === 0 ? (
              <p className="hint empty-conversation">No messages yet. Write one below.</p>
            ) : (
              <ol className="messages">
                {messages.map((m, index) => (
                  <MessageView
                    key={m.id}
                    message={m}
                    onRetry={index === messages.length - 1 && m.error && !streaming ? retry : undefined}
                  />
                ))}
              </ol>
            )}
          </div>
          <p className="visually-hidden" role="status" aria-live="polite" data-testid="playground-announcement">
            {announcement}
          </p>

          <form className="composer" onSubmit={onSubmit} aria-label="Write a message">
            <ErrorAlert error={formError} />
            <div className="field">
              <label htmlFor={`${formId}-message`}>Message</label>
              <textarea
                id={`${formId}-message`}
                ref={textarea}
                rows={3}
                value={draft}
                onChange={(e) => setDraft(e.target.value)}
                onKeyDown={onKeyDown}
                aria-describedby={`${formId}-message-hint`}
              />
              <p className="hint" id={`${formId}-message-hint`}>
                Enter sends; Shift+Enter starts a new line.
              </p>
            </div>
            <div className="actions">
              <button type="submit" disabled={streaming || !selected}>
                Send
              </button>
              {streaming && (
                <button
                  type="button"
                  className="danger"
                  ref={stopButton}
                  onClick={stop}
                  onFocus={() => (stopHadFocus.current = true)}
                  onBlur={() => (stopHadFocus.current = false)}
                >
                  Stop
                </button>
              )}
              <button type="button" className="secondary" onClick={clear} disabled={messages.length === 0}>
                Clear
              </button>
            </div>
          </form>
        </div>

        <form className="panel playground-settings" aria-labelledby={`${formId}-settings-heading`} onSubmit={(e) => e.preventDefault()}>
          <h2 id={`${formId}-settings-heading`}>Settings</h2>
          <div className="field">
            <label htmlFor={`${formId}-temperature`}>Temperature</label>
            <input
              id={`${formId}-temperature`}
              type="number"
              inputMode="decimal"
              min={0}
              max={2}
              step={0.1}
              value={settings.temperature}
              onChange={(e) => set('temperature')(e.target.value)}
              aria-invalid={settingErrors.temperature ? true : undefined}
              aria-describedby={`${formId}-temperature-hint`}
            />
            <p className="hint" id={`${formId}-temperature-hint`}>
              {settingErrors.temperature ?? '0 to 2; lower is more predictable.'}
            </p>
          </div>
          <div className="field">
            <label htmlFor={`${formId}-top-p`}>Top P</label>
            <input
              id={`${formId}-top-p`}
              type="number"
              inputMode="decimal"
              min={0}
              max={1}
              step={0.05}
              value={settings.topP}
              onChange={(e) => set('topP')(e.target.value)}
              aria-invalid={settingErrors.topP ? true : undefined}
              aria-describedby={`${formId}-top-p-hint`}
            />
            <p className="hint" id={`${formId}-top-p-hint`}>
              {settingErrors.topP ?? '0 to 1.'}
            </p>
          </div>
          <div className="field">
            <label htmlFor={`${formId}-max-tokens`}>Max tokens</label>
            <input
              id={`${formId}-max-tokens`}
              type="number"
              inputMode="numeric"
              min={1}
              step={1}
              value={settings.maxTokens}
              onChange={(e) => set('maxTokens')(e.target.value)}
              aria-invalid={settingErrors.maxTokens ? true : undefined}
              aria-describedby={`${formId}-max-tokens-hint`}
            />
            <p className="hint" id={`${formId}-max-tokens-hint`}>
              {settingErrors.maxTokens ?? 'The most tokens the answer may have.'}
            </p>
          </div>
          <div className="field checkbox-field">
            <label>
              <input type="checkbox" checked={settings.reasoning} onChange={(e) => set('reasoning')(e.target.checked)} /> Reasoning
            </label>
            <p className="hint">
              Models that think before answering do so when this is on (<code>enable_thinking</code>); their reasoning shows apart from the
              answer.
            </p>
          </div>
          <div className="field">
            <label htmlFor={`${formId}-system`}>System prompt</label>
            <textarea id={`${formId}-system`} rows={3} value={settings.system} onChange={(e) => set('system')(e.target.value)} />
            <p className="hint">Optional; sent first with every message.</p>
          </div>
          <button type="button" className="secondary" onClick={() => setSettings(DEFAULT_SETTINGS)}>
            Reset settings
          </button>
        </form>
      </div>
    </div>
  );
}
