/**
 * The conversation's state and its streaming: a message goes out through the
 * `chatCompletion` subscription and the answer grows as its chunks arrive;
 * ending the subscription is Stop (the gateway cancels the generation). What
 * happened is said through `announcement`, for a polite live region: when an
 * answer is complete, never each token.
 */
import { useCallback, useEffect, useRef, useState } from 'react';
import type { ApiError } from '../../api/graphql.js';
import { PlaygroundChatDocument, type ChatCompletionInput } from '../../api/generated.js';
import { useSession } from '../../session.js';
import { checkSettings, TOP_ALTERNATIVES, type EndpointChoice, type Message, type Settings, type TokenProbability } from './chat-model.js';

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

export function useChatStream({
  endpoint,
  settings,
  focusComposer,
}: {
  /** The endpoint messages go to. */
  endpoint: EndpointChoice | undefined;
  settings: Settings;
  /** Puts the focus back in the message box. */
  focusComposer(): void;
}) {
  const { api } = useSession();
  const [messages, setMessages] = useState<Message[]>([]);
  const [announcement, setAnnouncement] = useState('');
  const [formError, setFormError] = useState<string | undefined>();
  const stopRef = useRef<(() => void) | undefined>(undefined);
  const nextId = useRef(1);
  const streaming = messages.some((m) => m.streaming);

  // Leaving the page ends the answer being streamed (and the generation with it).
  useEffect(() => () => stopRef.current?.(), []);

  const update = useCallback((messageId: number, change: (m: Message) => Partial<Message>) => {
    setMessages((all) => all.map((m) => (m.id === messageId ? { ...m, ...change(m) } : m)));
  }, []);

  /** Sends `text` after the conversation `before` (the messages shown, or fewer for a retry). */
  const sendAfter = (text: string, before: Message[]): boolean => {
    if (streaming) return false;
    if (!endpoint) {
      setFormError('Pick an endpoint first.');
      return false;
    }
    if (!text) {
      setFormError('Write a message first.');
      focusComposer();
      return false;
    }
    const { numbers, valid } = checkSettings(settings);
    if (!valid) {
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
      endpointName: endpoint.name,
      streaming: true,
      startedAt,
    };
    setMessages([...before, userMessage, answer]);

    const input: ChatCompletionInput = {
      model: endpoint.id,
      messages: [
        ...(settings.system.trim() ? [{ role: 'system', content: settings.system.trim() }] : []),
        ...history,
        { role: 'user', content: text },
      ],
      chatTemplateKwargs: { enable_thinking: settings.reasoning },
      includeUsage: true,
      ...(settings.json ? { responseFormat: { type: 'json_object' } } : {}),
      // Each number setting is the input field of its name; an empty one is left to the endpoint's default.
      ...Object.fromEntries(Object.entries(numbers).filter(([, value]) => value !== undefined)),
      ...(settings.probabilities ? { logprobs: true, topLogprobs: TOP_ALTERNATIVES } : {}),
    };

    let chunkId: string | undefined;
    let finishReason: string | undefined;
    let finished = false;
    // The answer's tokens with their probabilities, gathered here and shown once the answer ends: copying them into
    // the message at every chunk (and shading every token at every render) froze the tab on long answers.
    const tokens: TokenProbability[] = [];
    const finish = (change: Partial<Message>, say: string) => {
      if (finished) return;
      finished = true;
      stopRef.current = undefined;
      const endedAt = performance.now();
      update(answerId, () => ({ ...change, streaming: false, endedAt, ...(tokens.length > 0 ? { tokens } : {}) }));
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
          // The tokens of the answer (not of the reasoning) with their probabilities.
          if (!reasoning && choice?.logprobs) for (const token of choice.logprobs) tokens.push(token);
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

  return {
    messages,
    streaming,
    announcement,
    formError,
    /** Sends `text` after the conversation shown; false when it was not sent (the reason is in `formError`). */
    send: (text: string) => sendAfter(text, messages),
    /** Sends the failed answer's question again, in place of the failed pair. */
    retry: () => {
      const question = messages[messages.length - 2];
      if (question?.role !== 'user') return;
      sendAfter(question.content, messages.slice(0, -2));
      focusComposer();
    },
    stop: () => {
      stopRef.current?.();
      focusComposer();
    },
    clear: () => {
      stopRef.current?.();
      setMessages([]);
      setAnnouncement('Conversation cleared.');
      focusComposer();
    },
  };
}
