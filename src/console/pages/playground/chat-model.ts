/** The playground's data: the conversation's messages, the endpoints to pick from, and the generation settings with their rules. */

export interface Usage {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
}

/** One answer token and how likely it was, with the likeliest alternatives (the `logprobs` of the answer). */
export interface TokenProbability {
  token: string;
  logprob: number;
  topLogprobs: { token: string; logprob: number }[];
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
  /** The answer's tokens with their probabilities, when the settings asked for them. */
  tokens?: TokenProbability[];
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
  topK: string;
  minP: string;
  presencePenalty: string;
  frequencyPenalty: string;
  repetitionPenalty: string;
  /** Shows each answer token's probability (`logprobs`). */
  probabilities: boolean;
}

export const DEFAULT_SETTINGS: Settings = {
  temperature: '0.7',
  topP: '1',
  maxTokens: '512',
  reasoning: true,
  json: false,
  system: '',
  topK: '',
  minP: '',
  presencePenalty: '',
  frequencyPenalty: '',
  repetitionPenalty: '',
  probabilities: false,
};

/** The likeliest alternatives shown per answer token. */
export const TOP_ALTERNATIVES = 5;

/** A number field's value: undefined when empty (the endpoint's default), NaN when out of bounds. */
function parseNumber(value: string, min: number, max: number, integer = false): number | undefined {
  if (value.trim() === '') return undefined;
  const n = Number(value);
  if (!Number.isFinite(n) || n < min || n > max || (integer && !Number.isInteger(n))) return Number.NaN;
  return n;
}

/** Each number setting: its bounds, and what to say when it is out of them (the gateway's rules). */
const NUMBER_RULES = {
  temperature: { min: 0, max: 2, rule: 'A number from 0 to 2.' },
  topP: { min: 0, max: 1, rule: 'A number from 0 to 1.' },
  maxTokens: { min: 1, max: 1_000_000, integer: true, rule: 'A whole number, at least 1.' },
  topK: { min: 0, max: 1_000_000, integer: true, rule: 'A whole number, 0 or more.' },
  minP: { min: 0, max: 1, rule: 'A number from 0 to 1.' },
  presencePenalty: { min: -2, max: 2, rule: 'A number from -2 to 2.' },
  frequencyPenalty: { min: -2, max: 2, rule: 'A number from -2 to 2.' },
  repetitionPenalty: { min: Number.MIN_VALUE, max: 10, rule: 'A number above 0, at most 10.' },
} as const satisfies Record<string, { min: number; max: number; integer?: boolean; rule: string }>;

type NumberSetting = keyof typeof NUMBER_RULES;

/** The settings' numbers and, for each that is not valid, what it should be. */
export function checkSettings(settings: Settings) {
  const numbers = {} as Record<NumberSetting, number | undefined>;
  const errors = {} as Record<NumberSetting, string | undefined>;
  for (const [field, r] of Object.entries(NUMBER_RULES) as [NumberSetting, (typeof NUMBER_RULES)[NumberSetting]][]) {
    numbers[field] = parseNumber(settings[field], r.min, r.max, 'integer' in r && r.integer);
    errors[field] = Number.isNaN(numbers[field]) ? r.rule : undefined;
  }
  return { numbers, errors, valid: Object.values(errors).every((e) => e === undefined) };
}
