/** The generation settings sent with every message; a number that is not valid says so in place of its hint. */
import { useId, useState, type Dispatch, type SetStateAction } from 'react';
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

/** The sampling settings most people leave alone, folded away; empty means the engine's default. */
const MORE_SAMPLING = [
  { field: 'topK', label: 'Top K', inputMode: 'numeric', min: 0, step: 1, hint: 'Sample from the K likeliest tokens; 0 or empty: all.' },
  {
    field: 'minP',
    label: 'Min P',
    inputMode: 'decimal',
    min: 0,
    max: 1,
    step: 0.01,
    hint: '0 to 1: drop tokens below this share of the likeliest.',
  },
  {
    field: 'presencePenalty',
    label: 'Presence penalty',
    inputMode: 'decimal',
    min: -2,
    max: 2,
    step: 0.1,
    hint: '-2 to 2: against any token already in the answer.',
  },
  {
    field: 'frequencyPenalty',
    label: 'Frequency penalty',
    inputMode: 'decimal',
    min: -2,
    max: 2,
    step: 0.1,
    hint: '-2 to 2: against tokens by how often they came.',
  },
  {
    field: 'repetitionPenalty',
    label: 'Repetition penalty',
    inputMode: 'decimal',
    min: 0,
    max: 10,
    step: 0.05,
    hint: 'Above 0, at most 10; 1 is none. Counts the prompt too.',
  },
] as const satisfies readonly {
  field: keyof Settings;
  label: string;
  inputMode: 'decimal' | 'numeric';
  min: number;
  max?: number;
  step: number;
  hint: string;
}[];

export function SettingsPanel({ settings, onChange }: { settings: Settings; onChange: Dispatch<SetStateAction<Settings>> }) {
  const id = useId();
  const { errors } = checkSettings(settings);
  const [moreOpen, setMoreOpen] = useState(false);
  // Open whenever one of them is set, so that nothing in effect is hidden.
  const moreSet = MORE_SAMPLING.some(({ field }) => settings[field].trim() !== '');
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
      <div className="field checkbox-field">
        <label>
          <input type="checkbox" checked={settings.probabilities} onChange={(e) => set('probabilities')(e.target.checked)} /> Token
          probabilities
        </label>
        <p className="hint">
          Shades each answer token by how likely the model found it, and lists its likeliest alternatives (<code>logprobs</code>).
        </p>
      </div>
      <details className="more-sampling" open={moreOpen || moreSet} onToggle={(e) => setMoreOpen(e.currentTarget.open)}>
        <summary>More sampling</summary>
        {MORE_SAMPLING.map(({ field, label, hint, ...bounds }) => (
          <NumberSetting
            key={field}
            id={`${id}-${field}`}
            label={label}
            {...bounds}
            value={settings[field]}
            onChange={set(field)}
            error={errors[field]}
            hint={hint}
          />
        ))}
      </details>
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
