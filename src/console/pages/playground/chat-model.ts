/** The playground's data: the conversation's messages, the endpoints to pick from, and the generation settings with their rules. */

export interface Usage {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
}

export interface Message {
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

export interface EndpointChoice {
  id: string;
  name: string;
  projectName: string;
  status: string;
}

export interface Settings {
  temperature: string;
  topP: string;
  maxTokens: string;
  reasoning: boolean;
  /** Answers in JSON (`response_format: json_object`). */
  json: boolean;
  system: string;
}

export const DEFAULT_SETTINGS: Settings = { temperature: '0.7', topP: '1', maxTokens: '512', reasoning: true, json: false, system: '' };

/** A number field's value: undefined when empty (the endpoint's default), NaN when out of bounds. */
function parseNumber(value: string, min: number, max: number, integer = false): number | undefined {
  if (value.trim() === '') return undefined;
  const n = Number(value);
  if (!Number.isFinite(n) || n < min || n > max || (integer && !Number.isInteger(n))) return Number.NaN;
  return n;
}

/** The settings' numbers and, for each that is not valid, what it should be. */
export function checkSettings(settings: Settings) {
  const numbers = {
    temperature: parseNumber(settings.temperature, 0, 2),
    topP: parseNumber(settings.topP, 0, 1),
    maxTokens: parseNumber(settings.maxTokens, 1, 1_000_000, true),
  };
  const errors = {
    temperature: Number.isNaN(numbers.temperature) ? 'A number from 0 to 2.' : undefined,
    topP: Number.isNaN(numbers.topP) ? 'A number from 0 to 1.' : undefined,
    maxTokens: Number.isNaN(numbers.maxTokens) ? 'A whole number, at least 1.' : undefined,
  };
  return { numbers, errors, valid: !errors.temperature && !errors.topP && !errors.maxTokens };
}
