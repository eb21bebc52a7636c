/**
 * The chat playground: pick one of the team's endpoints, write, and read the
 * answer as it streams through the `chatCompletion` subscription (ending the
 * subscription is Stop: the gateway cancels the generation). The reasoning
 * (the think block) shows in its own collapsible block above the answer; the
 * finish reason, token usage and timings follow it. A polite live region
 * says when an answer is complete, never each token.
 */
import { useRef, useState } from 'react';
import { ErrorAlert } from '../../components/ui.js';
import { useSession } from '../../session.js';
import { DEFAULT_SETTINGS, type Settings } from './chat-model.js';
import { Composer } from './composer.js';
import { Conversation } from './conversation.js';
import { EndpointPicker } from './endpoint-picker.js';
import { SettingsPanel } from './settings-panel.js';
import { useChatStream } from './use-chat-stream.js';
import { useEndpointChoices } from './use-endpoint-choices.js';
import './playground.css';

export function PlaygroundPage({ id }: { id?: string | undefined }) {
  const { team } = useSession();
  const choices = useEndpointChoices(id);
  const [settings, setSettings] = useState<Settings>(DEFAULT_SETTINGS);
  const textarea = useRef<HTMLTextAreaElement>(null);
  const chat = useChatStream({ endpoint: choices.selected, settings, focusComposer: () => textarea.current?.focus() });

  return (
    <div className="playground">
      <h1>Playground</h1>
      {!team && <p>You are in no team yet, so there are no endpoints to talk to.</p>}
      <ErrorAlert error={choices.list.error} />

      <div className="playground-grid">
        <div className="playground-chat">
          <EndpointPicker choices={choices} />
          <Conversation messages={chat.messages} onRetry={chat.streaming ? undefined : chat.retry} />
          <p className="visually-hidden" role="status" aria-live="polite" data-testid="playground-announcement">
            {chat.announcement}
          </p>
          <Composer
            textarea={textarea}
            error={chat.formError}
            streaming={chat.streaming}
            canSend={choices.selected !== undefined}
            canClear={chat.messages.length > 0}
            onSend={chat.send}
            onStop={chat.stop}
            onClear={chat.clear}
          />
        </div>
        <SettingsPanel settings={settings} onChange={setSettings} />
      </div>
    </div>
  );
}
