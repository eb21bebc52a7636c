/** The generation settings sent with every message; a number that is not valid says so in place of its hint. */
import { useId, type Dispatch, type SetStateAction } from 'react';
import { checkSettings, DEFAULT_SETTINGS, type Settings } from './chat-model.js';

function NumberSetting({
  id,
  label,
  value,
  onChange,
  error,
  hint,
  ...bounds
}: {
  id: string;
  label: string;
  value: string;
  onChange(value: string): void;
  error: string | undefined;
  hint: string;
  inputMode: 'decimal' | 'numeric';
  min: number;
  max?: number;
  step: number;
}) {
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <input
        id={id}
        type="number"
        {...bounds}
        value={value}
        onChange={(e) => onChange(e.target.value)}
        aria-invalid={error ? true : undefined}
        aria-describedby={`${id}-hint`}
      />
      <p className="hint" id={`${id}-hint`}>
        {error ?? hint}
      </p>
    </div>
  );
}

export function SettingsPanel({ settings, onChange }: { settings: Settings; onChange: Dispatch<SetStateAction<Settings>> }) {
  const id = useId();
  const { errors } = checkSettings(settings);
  const set = (field: keyof Settings) => (value: string | boolean) => onChange((s) => ({ ...s, [field]: value }));
  return (
    <form className="panel playground-settings" aria-labelledby={`${id}-settings-heading`} onSubmit={(e) => e.preventDefault()}>
      <h2 id={`${id}-settings-heading`}>Settings</h2>
      <NumberSetting
        id={`${id}-temperature`}
        label="Temperature"
        inputMode="decimal"
        min={0}
        max={2}
        step={0.1}
        value={settings.temperature}
        onChange={set('temperature')}
        error={errors.temperature}
        hint="0 to 2; lower is more predictable."
      />
      <NumberSetting
        id={`${id}-top-p`}
        label="Top P"
        inputMode="decimal"
        min={0}
        max={1}
        step={0.05}
        value={settings.topP}
        onChange={set('topP')}
        error={errors.topP}
        hint="0 to 1."
      />
      <NumberSetting
        id={`${id}-max-tokens`}
        label="Max tokens"
        inputMode="numeric"
        min={1}
        step={1}
        value={settings.maxTokens}
        onChange={set('maxTokens')}
        error={errors.maxTokens}
        hint="The most tokens the answer may have."
      />
      <div className="field checkbox-field">
        <label>
          <input type="checkbox" checked={settings.reasoning} onChange={(e) => set('reasoning')(e.target.checked)} /> Reasoning
        </label>
        <p className="hint">
          Models that think before answering do so when this is on (<code>enable_thinking</code>); their reasoning shows apart from the
          answer.
        </p>
      </div>
      <div className="field checkbox-field">
        <label>
          <input type="checkbox" checked={settings.json} onChange={(e) => set('json')(e.target.checked)} /> JSON output
        </label>
        <p className="hint">
          The answer is one JSON object, enforced while it is generated (<code>response_format: json_object</code>). Ask for JSON in the
          message too.
        </p>
      </div>
      <div className="field">
        <label htmlFor={`${id}-system`}>System prompt</label>
        <textarea id={`${id}-system`} rows={3} value={settings.system} onChange={(e) => set('system')(e.target.value)} />
        <p className="hint">Optional; sent first with every message.</p>
      </div>
      <button type="button" className="secondary" onClick={() => onChange(DEFAULT_SETTINGS)}>
        Reset settings
      </button>
    </form>
  );
}
